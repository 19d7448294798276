"""ovsite beside OpenViking 0.5.2 in one run: `.venv/bin/python -m bench.vs_openviking.run` (`make
bench-vs-openviking`)."""
