"""Where a trial's usage figures come from: the gateway's metering or the host's own stream.

With the gateway on (docs/gateway.md) every trial says in ``usage`` whether its
``tokens``, ``cost`` and ``model`` were read from the provider's responses by the
engine (``gateway``) or are what the host printed (``host``, and why); the run's
``meta.gateway`` counts what the gateway refused. With the gateway off neither is
written, so such a report is the reference's.
"""

from __future__ import annotations

from typing import Literal

from .base import OutputModel

__all__ = ["CostSource", "GatewaySummary", "TrialUsage", "UsageSource"]

#: Where a trial's figures come from.
UsageSource = Literal["gateway", "host"]
#: Where a trial's cost comes from: the host's own figure, or the gateway's price table.
CostSource = Literal["host", "price-table"]


class TrialUsage(OutputModel):
    """Where a trial's ``tokens``, ``cost`` and ``model`` come from (additive)."""

    source: UsageSource
    """``gateway``: read by the engine from the provider's responses; ``host``: what the
    host's own event stream reported (``fallback`` says why)."""
    calls: int = 0
    """Model calls the gateway forwarded for this trial."""
    input_tokens: int | None = None
    """Input tokens the provider counted (not read from cache), over all calls."""
    output_tokens: int | None = None
    """Output tokens the provider counted, over all calls."""
    cache_read_tokens: int | None = None
    """Input tokens read from the provider's prompt cache, over all calls."""
    cache_write_tokens: int | None = None
    """Input tokens written to the provider's prompt cache, over all calls."""
    cost_source: CostSource | None = None
    """Where ``cost`` comes from: the host's reported cost, else the gateway's price
    table (docs/gateway.md); absent when there is no cost."""
    host_tokens: int | None = None
    """What the host's stream reported, kept beside the gateway's figure."""
    host_cost: float | None = None
    """The cost the host's stream reported, kept beside the gateway's figure."""
    refused: int | None = None
    """Requests on this trial's route refused for lacking its token; absent: none."""
    fallback: str | None = None
    """Why the figures are the host's although the gateway was on."""


class GatewaySummary(OutputModel):
    """The model gateway's run-wide figures (additive)."""

    calls: int = 0
    """Model calls forwarded, over all trials."""
    refused: int = 0
    """Requests refused: on an unknown or ended trial route, or without the trial's token."""
    fallback_trials: int = 0
    """Trials whose figures are the host's (``usage.source: host``)."""
