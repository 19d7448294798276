"""The benchmarks, each run from the repository root as `.venv/bin/python -m bench.<name>`; what they share is
bench/harness.py, what they measured bench/RESULTS.md."""
