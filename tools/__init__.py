"""Maintenance tools for the atlante-eval repository (run with ``python -m tools.<name>``)."""
