"""Benchmarks for atlante-eval: run them all with ``python -m bench`` from the repo root."""
