"""The parts of bench/gpu/check.py (see its docstring): checks, context, data, ilge, pruning, timings, report."""
