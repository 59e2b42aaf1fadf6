"""The engine's model gateway: each trial's model calls, metered from the provider's answers.

:mod:`.server` is the run's listener and its lifecycle (:func:`open_gateway`);
:mod:`.routes` one trial's route (where it goes, its stand-in credentials, what
it spent); :mod:`.metering` reads the providers' answers; :mod:`.prices` is the
price table; :mod:`.crosscheck` compares the transcript's tool calls with the
ones the model asked for; :mod:`.records` writes ``model-calls.jsonl``. The HTTP
side (:mod:`.exchange`: h11 and httpx) loads with the first connection only.
Docs: docs/gateway.md.
"""

from __future__ import annotations

from .routes import RouteUsage, TrialRoute
from .server import Gateway, open_gateway

__all__ = ["Gateway", "RouteUsage", "TrialRoute", "open_gateway"]
