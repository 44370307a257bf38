"""Benchmarks: `make bench` (or `python -m bench.run`). Results go to docs/performance.md."""
