"""A newcomer's machine: an empty cache, two test runs started at once, and a build killed half-way.

Every fixture and GGUF file is built on first use under a file lock and renamed into place whole, so two processes
that start on one empty cache both get the same complete fixture, and a build killed with SIGKILL leaves nothing that
a later run trusts (issue 30)."""
import hashlib, json, os, signal, subprocess, sys, textwrap
from pathlib import Path

BUILD = textwrap.dedent('''
    import hashlib, json, sys
    from layerkit.testing import load_tiny, tiny_gguf_path, tiny_model_path
    from layerkit.hub import load_model
    print('ready', flush=True); sys.stdin.readline()  # start together
    def digest(m):
        h = hashlib.sha256()
        for n, t in m.state_dict().items(): h.update(n.encode()); h.update(t.float().contiguous().numpy().tobytes())
        return h.hexdigest()[:16]
    folder, g = tiny_model_path('llama', seed=7), tiny_gguf_path('llama', qtype='Q8_0', seed=7)
    print(json.dumps(dict(folder=str(folder), fixture=digest(load_tiny('llama', seed=7)[0]), gguf=str(g),
                          gguf_sha=hashlib.sha256(g.read_bytes()).hexdigest(), dequantized=digest(load_model(str(g))))))
''')


def _env(cache: Path) -> dict:
    return dict(os.environ, LAYERKIT_CACHE=str(cache), HF_HOME=str(cache/'hf'), OMP_NUM_THREADS='1', HF_HUB_OFFLINE='1')


def _leftovers(root: Path) -> list[str]:
    "Temporaries (`.NAME.tmp-*`, `.NAME.old-*`) anywhere under `root`."
    return sorted(str(p.relative_to(root)) for p in root.rglob('.*') if '.tmp-' in p.name or '.old-' in p.name)


def test_two_processes_on_one_empty_cache_build_each_thing_once(tmp_path):
    cache = tmp_path/'cache'
    procs = [subprocess.Popen([sys.executable, '-c', BUILD], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=_env(cache)) for _ in range(2)]
    for p in procs: assert p.stdout.readline().strip() == 'ready', p.stderr.read()
    for p in procs: p.stdin.write('go\n'); p.stdin.flush()
    outs = []
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err[-3000:]
        outs.append(json.loads(out.strip().splitlines()[-1]))
    assert outs[0] == outs[1], outs  # one folder, one GGUF file, the same weights from the fixture and from the GGUF
    assert _leftovers(cache) == [], _leftovers(cache)
    assert (Path(outs[0]['folder'])/'config.json').is_file()


KILLED = textwrap.dedent('''
    import sys, time
    import layerkit.testing as t
    def half(arch, out, *a, **k):  # writes part of the folder, then waits to be killed
        (out/'model.safetensors').write_bytes(b'half')
        print('half-built', flush=True); time.sleep(600)
    t._build = half
    t.tiny_model_path('gpt2', seed=3, num_hidden_layers=2)
''')


def test_a_build_killed_half_way_is_rebuilt_not_trusted(tmp_path, monkeypatch):
    cache = tmp_path/'cache'
    p = subprocess.Popen([sys.executable, '-c', KILLED], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env=_env(cache))
    assert p.stdout.readline().strip() == 'half-built', p.stderr.read()
    os.kill(p.pid, signal.SIGKILL); p.wait()
    left = _leftovers(cache)
    assert len(left) == 1 and left[0].startswith('fixtures/.gpt2-2-'), left  # the killed build's temporary, nothing else
    from layerkit.testing import load_tiny, tiny_model_path
    monkeypatch.setenv('LAYERKIT_CACHE', str(cache))
    folder, m = tiny_model_path('gpt2', seed=3, num_hidden_layers=2), load_tiny('gpt2', seed=3, num_hidden_layers=2)[0]
    assert m.config.n_layer == 2 and (folder/'config.json').is_file(), sorted(f.name for f in folder.iterdir())
    assert (folder/'model.safetensors').read_bytes()[:4] != b'half'  # rebuilt, not the killed build's part
    assert _leftovers(cache) == [], _leftovers(cache)  # and the dead process's temporary is gone
