"""Two processes saving a `LayerClassifier` to the same folder at once (issue 11: 15 failures in 800 saves and 5
leftover `.old-*` folders before the swap was locked). Every save must succeed, the folder must load, and nothing
may be left beside it."""
import json, os, subprocess, sys, textwrap
from pathlib import Path

WORKER = textwrap.dedent('''
    import json, sys, numpy as np, torch
    torch.set_num_threads(1)
    from layerkit import LayerClassifier, DeepSetConfig
    out, seed, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    rng = np.random.default_rng(seed)
    X, y = rng.normal(size=(24, 3, 8)).astype('float32'), np.arange(24) % 2
    clf = LayerClassifier(DeepSetConfig(epochs=1), random_state=seed, verbose=False).fit(X, y)
    print('ready', flush=True); sys.stdin.readline()  # start together
    failed = []
    for i in range(n):
        try: clf.save(out)
        except Exception as e: failed.append(f'{type(e).__name__}: {e}')
    print(json.dumps(failed))
''')


def test_two_processes_save_to_one_folder(tmp_path):
    out, n = tmp_path/'clf', 120
    env = dict(os.environ, OMP_NUM_THREADS='1', HF_HUB_OFFLINE='1')
    procs = [subprocess.Popen([sys.executable, '-c', WORKER, str(out), str(seed), str(n)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env) for seed in (0, 1)]
    for p in procs: assert p.stdout.readline().strip() == 'ready', p.stderr.read()
    for p in procs: p.stdin.write('go\n'); p.stdin.flush()
    results = [p.communicate(timeout=240) for p in procs]
    failures = [json.loads(o.strip().splitlines()[-1]) for o, _ in results]
    assert failures == [[], []], (failures[0][:3], failures[1][:3], [e[-1500:] for _, e in results])
    from layerkit import LayerClassifier
    LayerClassifier.load(out)  # the survivor is a complete save
    assert sorted(p.name for p in tmp_path.iterdir()) == ['clf'], sorted(p.name for p in tmp_path.iterdir())
