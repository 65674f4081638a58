"""The benchmarks of pruning depth: each module is a script (`python bench/pruning/NAME.py`); the others import it as
`pruning.NAME` (bench/ on sys.path). Results go to bench/pruning/results/; the index is bench/README.md."""
