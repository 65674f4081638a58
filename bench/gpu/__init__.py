"""The parts of bench/gpu_check.py (see its docstring): checks, context, data, ilge, pruning, timings, report."""
