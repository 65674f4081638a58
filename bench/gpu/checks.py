"""The comparisons behind gpu/check.py's checks, as plain functions, and the log they are recorded in.

Each comparison takes the device-side value first and the reference second, and returns an `Outcome` (true when the
check passed) with the value and the limit as they are printed and written to gpu.md. `Log.check` runs one, records
it under a name and prints `ok   NAME: ...` or `FAIL NAME: ...`; a failure does not stop the run. `--perturb NAME`
makes the named check's device-side value wrong on purpose (`perturbed`): that check must then fail.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch


@dataclass(frozen=True)
class Outcome:
    "A check's result: whether it passed, the value found, the limit, and (on a failure) where it went wrong."
    ok: bool
    value: str
    limit: str
    detail: str = ''

    def __bool__(self) -> bool: return self.ok


def _double(x) -> torch.Tensor:
    return x.detach().double().cpu() if isinstance(x, torch.Tensor) else torch.as_tensor(np.asarray(x, dtype=np.float64))


def close(got, want, tol: float, per_layer: bool = False) -> Outcome:
    "Relative error ||got - want|| / ||want|| (per layer of an (N, L, D) array when `per_layer`) at most `tol`."
    g, w = _double(got), _double(want)
    if g.shape != w.shape: return Outcome(False, f"shape {tuple(g.shape)}", f"shape {tuple(w.shape)}")
    norm = lambda t: torch.linalg.vector_norm(t)
    if per_layer:
        errs = [(norm(g[:, l] - w[:, l]) / norm(w[:, l]).clamp_min(1e-30)).item() for l in range(g.shape[1])]
        err, where = max(errs), int(np.argmax(errs))
    else:
        err, where = (norm(g - w) / norm(w).clamp_min(1e-30)).item(), None
    ok = math.isfinite(err) and err <= tol
    i = int((g - w).abs().nan_to_num(float('inf')).argmax())
    detail = (f"largest difference at flat index {i}: got {g.reshape(-1)[i].item():.6g}, want {w.reshape(-1)[i].item():.6g}"
              + ('' if where is None else f"; worst layer {where}"))
    return Outcome(ok, f"relative error {err:.2e}" + ('' if where is None else f" (worst layer {where})"), f"{tol:.0e}",
                   '' if ok else detail)


def values(got: dict, want: dict, tol: float) -> Outcome:
    "Two dicts of measurements (key -> float) with the same keys, each within `tol` (absolute)."
    if set(got) != set(want): return Outcome(False, f"{len(got)} keys", f"the {len(want)} keys of the reference")
    diffs = {k: abs(got[k] - want[k]) for k in want}
    k = max(diffs, key=diffs.get)
    ok = all(math.isfinite(v) for v in diffs.values()) and diffs[k] <= tol
    return Outcome(ok, f"largest |difference| {diffs[k]:.2e} over {len(diffs)} values", f"{tol:.0e}",
                   '' if ok else f"at {k}: got {got[k]!r}, want {want[k]!r}")


def _short(v) -> str: return repr(v) if len(repr(v)) < 80 else repr(v)[:77] + '...'


def equal(got, want) -> Outcome:
    "`got == want` (lists, arrays, strings)."
    a, b = (np.asarray(got), np.asarray(want)) if not isinstance(got, str) else (got, want)
    ok = (a.shape == b.shape and bool((a == b).all())) if isinstance(a, np.ndarray) else a == b
    if ok: return Outcome(True, 'equal', 'equal')
    if isinstance(a, np.ndarray) and a.shape == b.shape:
        i = int(np.argmax((a != b).reshape(-1)))
        return Outcome(False, f"{int((a != b).sum())} of {a.size} differ", 'equal',
                       f"first at flat index {i}: got {a.reshape(-1)[i]!r}, want {b.reshape(-1)[i]!r}")
    return Outcome(False, f"got {_short(got)}", f"want {_short(want)}")


def at_least(value: float, limit: float, what: str) -> Outcome:
    return Outcome(value >= limit, f"{what} {value:.4f}", f">= {limit}")


def at_most(value: float, limit: float, what: str) -> Outcome:
    return Outcome(value <= limit, f"{what} {value:.4f}", f"<= {limit}")


def perturbed(compare, got, want):
    "`got` made wrong for `compare` on purpose (`--perturb`), so that the check must fail."
    if compare is close: return _double(got) + (_double(want).abs().max() + 1)
    if compare is values: return {k: v + 1.0 for k, v in got.items()}
    if compare is equal: return f"{got!r} (perturbed)"
    if compare is at_least: return got - 1.0
    if compare is at_most: return got + 1.0
    raise ValueError(f"no perturbation for {compare!r}")


class Log:
    "The checks of one run, in order: dicts (check, ok, value, limit, detail), as gpu.json stores them."
    def __init__(self, perturb: str | None = None):
        self.checks: list[dict] = []
        self.perturb = perturb  # the name of the check to make fail, or None

    def record(self, name: str, outcome: Outcome) -> Outcome:
        "Keep `outcome` under `name` and print its line."
        o = outcome
        self.checks.append(dict(check=name, ok=bool(o.ok), value=o.value, limit=o.limit, detail=o.detail))
        if o.ok: print(f"ok   {name}: {o.value} (limit {o.limit})", flush=True)
        else: print(f"FAIL {name}: {o.value}, limit {o.limit}{'; ' + o.detail if o.detail else ''}", flush=True)
        return o

    def check(self, name: str, compare, got, want, *args, **kwargs) -> Outcome:
        "`compare(got, want, ...)` recorded under `name` (`got`, the device-side value, perturbed if `name` is `perturb`)."
        if name == self.perturb: got = perturbed(compare, got, want)
        return self.record(name, compare(got, want, *args, **kwargs))

    def fail(self, name: str, value: str, limit: str) -> Outcome:
        "A check that failed outright (an exception, a wrong placement): recorded without a comparison."
        return self.record(name, Outcome(False, value, limit))

    @property
    def failed(self) -> list[dict]: return [c for c in self.checks if not c['ok']]
