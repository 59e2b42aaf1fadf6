"""``python -m atlante_eval``: the same as the ``atlante-eval`` command."""

from .cli import main

main()
