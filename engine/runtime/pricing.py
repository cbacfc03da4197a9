"""Prices per million tokens, for cost before (dry run) and after a run.

The built-in table is a convenience snapshot and will age: pass ``--prices FILE`` (JSON
``{"model": {"input": USD_per_Mtok, "output": USD_per_Mtok}}``) to use your own. Models
are matched exactly, then by the longest known prefix (``gpt-4.1-2025-04-14`` ->
``gpt-4.1``). Unknown models cost 0 and are reported as unpriced.
"""
from __future__ import annotations

from pathlib import Path

import msgspec
import orjson


class Price(msgspec.Struct, frozen=True):
    input: float  # USD per 1M input tokens
    output: float  # USD per 1M output tokens


DEFAULT_PRICES: dict[str, Price] = {
    "offline": Price(0.0, 0.0),
    "mock": Price(0.0, 0.0),
    "gpt-4.1": Price(2.00, 8.00),
    "gpt-4.1-mini": Price(0.40, 1.60),
    "gpt-4.1-nano": Price(0.10, 0.40),
    "gpt-4o": Price(2.50, 10.00),
    "gpt-4o-mini": Price(0.15, 0.60),
    "o3": Price(2.00, 8.00),
    "o4-mini": Price(1.10, 4.40),
    "gemini-2.5-pro": Price(1.25, 10.00),
    "gemini-2.5-flash": Price(0.30, 2.50),
    "claude-sonnet-4": Price(3.00, 15.00),
    "claude-3-7-sonnet": Price(3.00, 15.00),
    "deepseek-chat": Price(0.27, 1.10),
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
        if model in self.prices:
            return self.prices[model]
        best = max((m for m in self.prices if model.startswith(m)), key=len, default=None)
        return self.prices[best] if best else None

    def cost(self, model: str, input_tokens: int, output_tokens: int) -> float:
        price = self.lookup(model)
        if price is None:
            return 0.0
        return (input_tokens * price.input + output_tokens * price.output) / 1e6
