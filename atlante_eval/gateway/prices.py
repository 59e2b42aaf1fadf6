"""The gateway's price table: list prices per million tokens, by model id.

A trial's cost is the host's own reported cost when it gave one; otherwise the
gateway prices its metered tokens with this table (docs/gateway.md lists it).
A model id matches the longest entry it starts with, after the provider prefix
(``anthropic/``, ``openai/``, ``us.anthropic.``) is dropped and the id lower-cased;
a model the table does not know has no price (the trial's cost stays unknown).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["PRICES", "Price", "price_of"]


@dataclass(frozen=True, slots=True)
class Price:
    """USD per million tokens."""

    input: float
    output: float
    cache_read: float
    cache_write: float

    def cost(
        self, *, input_tokens: int, output_tokens: int, cache_read: int, cache_write: int
    ) -> float:
        """The cost of these counts, in USD."""
        total = (
            input_tokens * self.input
            + output_tokens * self.output
            + cache_read * self.cache_read
            + cache_write * self.cache_write
        )
        return total / 1_000_000


def _anthropic(input_price: float, output_price: float) -> Price:
    """Anthropic's rule: cache writes cost 1.25 times the input, cache reads 0.1 times."""
    return Price(input_price, output_price, input_price * 0.1, input_price * 1.25)


def _openai(input_price: float, output_price: float, cached: float) -> Price:
    """OpenAI bills no cache writes; cached input has its own price."""
    return Price(input_price, output_price, cached, 0.0)


#: List prices (USD per million tokens) as published by the providers, 2025-11.
PRICES: Mapping[str, Price] = {
    "claude-opus-4-5": _anthropic(5.0, 25.0),
    "claude-opus-4-1": _anthropic(15.0, 75.0),
    "claude-opus-4": _anthropic(15.0, 75.0),
    "claude-sonnet-4-5": _anthropic(3.0, 15.0),
    "claude-sonnet-4": _anthropic(3.0, 15.0),
    "claude-3-7-sonnet": _anthropic(3.0, 15.0),
    "claude-3-5-sonnet": _anthropic(3.0, 15.0),
    "claude-haiku-4-5": _anthropic(1.0, 5.0),
    "claude-3-5-haiku": _anthropic(0.8, 4.0),
    "claude-3-haiku": _anthropic(0.25, 1.25),
    "gpt-5-nano": _openai(0.05, 0.40, 0.005),
    "gpt-5-mini": _openai(0.25, 2.0, 0.025),
    "gpt-5": _openai(1.25, 10.0, 0.125),
    "gpt-4.1-nano": _openai(0.10, 0.40, 0.025),
    "gpt-4.1-mini": _openai(0.40, 1.60, 0.10),
    "gpt-4.1": _openai(2.0, 8.0, 0.50),
    "gpt-4o-mini": _openai(0.15, 0.60, 0.075),
    "gpt-4o": _openai(2.50, 10.0, 1.25),
    "o4-mini": _openai(1.10, 4.40, 0.275),
    "o3-mini": _openai(1.10, 4.40, 0.55),
    "o3": _openai(2.0, 8.0, 0.50),
}

_PREFIXES = ("us.anthropic.", "eu.anthropic.", "apac.anthropic.", "anthropic.")


def price_of(model: str | None) -> Price | None:
    """The price of ``model`` (its longest matching table entry), or ``None``."""
    if not model:
        return None
    name = model.strip().lower().rsplit("/", 1)[-1]
    for prefix in _PREFIXES:
        if name.startswith(prefix):
            name = name[len(prefix) :]
    best = max((key for key in PRICES if name.startswith(key)), key=len, default=None)
    return PRICES[best] if best is not None else None
