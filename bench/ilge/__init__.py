"""The benchmarks of reading all layers (ILGE): each module is a script (`python bench/ilge/NAME.py`); the others import
it as `ilge.NAME` (bench/ on sys.path). Results go to bench/ilge/results/; the index is bench/README.md."""
