"""Prices per million tokens, for cost before (dry run) and after a run.

The built-in table is a convenience snapshot and will age: pass ``--prices FILE`` (JSON
``{"model": {"input": USD_per_Mtok, "output": USD_per_Mtok}}``) to use your own. Models
are matched exactly, then by the longest known prefix (``gpt-4.1-2025-04-14`` ->
``gpt-4.1``), and a router's provider prefix is dropped first (``openai/gpt-4.1`` and
``google/gemini-2.5-pro`` are priced as those models). A model the table does not know
has an **unknown** price, never a zero one: the run warns at its start and in the dry run
(naming ``--prices`` / ``--price-as``), and its cost figures are None in JSON and
"unknown" on screen (:func:`sum_costs`, :func:`cost_text`).

Optional fields per model: ``cached_input`` (input tokens served from the provider's
prefix cache; default: the full input price, so an unknown discount is never assumed)
and ``batch_input`` / ``batch_output`` / ``batch_cached_input`` (Batch API; default:
half the synchronous price, the usual provider discount).
"""
from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import msgspec
import orjson

from drscore.engine.runtime.calls.windows import base_model_name


class Price(msgspec.Struct, frozen=True):
    input: float  # USD per 1M input tokens
    output: float  # USD per 1M output tokens
    cached_input: float | None = None  # USD per 1M input tokens read from the prefix cache
    batch_input: float | None = None  # Batch API prices (default: half the synchronous ones)
    batch_output: float | None = None
    batch_cached_input: float | None = None

    def rates(self, *, batch: bool = False) -> tuple[float, float, float]:
        """(input, cached input, output) USD per 1M tokens, synchronous or batch."""
        cached = self.input if self.cached_input is None else self.cached_input
        if not batch:
            return self.input, cached, self.output
        return (self.input / 2 if self.batch_input is None else self.batch_input,
                cached / 2 if self.batch_cached_input is None else self.batch_cached_input,
                self.output / 2 if self.batch_output is None else self.batch_output)


DEFAULT_PRICES: dict[str, Price] = {
    "offline": Price(0.0, 0.0),
    "mock": Price(0.0, 0.0),
    "gpt-4.1": Price(2.00, 8.00, cached_input=0.50),
    "gpt-4.1-mini": Price(0.40, 1.60, cached_input=0.10),
    "gpt-4.1-nano": Price(0.10, 0.40, cached_input=0.025),
    "gpt-4o": Price(2.50, 10.00, cached_input=1.25),
    "gpt-4o-mini": Price(0.15, 0.60, cached_input=0.075),
    "o3": Price(2.00, 8.00, cached_input=0.50),
    "o4-mini": Price(1.10, 4.40, cached_input=0.275),
    "gemini-2.5-pro": Price(1.25, 10.00, cached_input=0.31),
    "gemini-2.5-flash": Price(0.30, 2.50, cached_input=0.075),
    "claude-sonnet-4": Price(3.00, 15.00, cached_input=0.30),
    "claude-3-7-sonnet": Price(3.00, 15.00, cached_input=0.30),
    "deepseek-chat": Price(0.27, 1.10, cached_input=0.07),
}


class PriceTable:
    def __init__(self, prices: dict[str, Price] | None = None) -> None:
        self.prices = dict(DEFAULT_PRICES if prices is None else prices)

    @classmethod
    def load(cls, path: str | Path | None) -> PriceTable:
        table = cls()
        if path:
            try:
                raw = orjson.loads(Path(path).read_bytes())
                table.prices.update(msgspec.convert(raw, dict[str, Price]))
            except (OSError, orjson.JSONDecodeError, msgspec.ValidationError) as e:
                raise ValueError(f"{path}: bad price table ({e}); expected "
                                 '{"model": {"input": 2.0, "output": 8.0}}') from None
        return table

    def lookup(self, model: str) -> Price | None:
        """The price of ``model``: exact name, then without a router's provider prefix,
        then the longest known prefix (a dated snapshot); None when unknown."""
        if model in self.prices:
            return self.prices[model]
        base = base_model_name(model)
        if base in self.prices:
            return self.prices[base]
        best = max((m for m in self.prices if model.startswith(m) or base.startswith(m)), key=len, default=None)
        return self.prices[best] if best else None

    def known(self, model: str) -> bool:
        """Whether ``model`` has a price (an unknown one is never taken as free)."""
        return self.lookup(model) is not None

    def cost(self, model: str, input_tokens: int, output_tokens: int, cached_input_tokens: int = 0, *,
             batch: bool = False) -> float:
        """USD for one call. ``input_tokens`` is the whole prompt (as ``usage.prompt_tokens``
        reports it), of which ``cached_input_tokens`` were read from the prefix cache."""
        price = self.lookup(model)
        if price is None:
            return 0.0
        p_in, p_cached, p_out = price.rates(batch=batch)
        cached = min(max(0, cached_input_tokens), input_tokens)
        return ((input_tokens - cached) * p_in + cached * p_cached + output_tokens * p_out) / 1e6


def unknown_price_message(model: str) -> str:
    """The warning for a model without a price (shown at the start and in the dry run)."""
    return (f"the price of {model!r} is unknown: costs are shown as 'unknown', not $0. Pass --prices FILE "
            '(JSON {"model": {"input": USD_per_Mtok, "output": USD_per_Mtok}}) or --price-as MODEL '
            "to price it.")


def sum_costs(values: Iterable[float | None]) -> float | None:
    """The sum of costs, or None when any of them is unknown."""
    total = 0.0
    for v in values:
        if v is None:
            return None
        total += v
    return total


def known_cost(value: float, priced: bool, digits: int = 8) -> float | None:
    """``value`` rounded when the model is priced, None (unknown) when not."""
    return round(value, digits) if priced else None


def cost_text(value: float | None, digits: int = 4) -> str:
    """A cost for people: ``0.0123``, or ``unknown``."""
    return "unknown" if value is None else f"{value:.{digits}f}"
