"""A dry run's input tokens per template, and the error bar of each total.

One call's error does not average out over a template's calls. They share the template's
fixed text and inputs of one kind, so under the model-wide ratios (all templates fitted
together) they miss alike: the total by about as much as a call. A template's own recorded
ratios (:meth:`TokenEstimator.planned_prompt`) remove that shared miss; what is left is its
per-call error, averaged over the calls planned and over the calls it was learned from.
Each bar is two standard deviations, relative to the template's planned tokens.
"""
from __future__ import annotations

import math

import msgspec

from drscore.engine.runtime.calls.tokens import TokenEstimator, TokenFit

# Standard deviations a bar spans: the total falls outside it about one time in twenty.
BAR_Z = 2.0


class PlannedInput(msgspec.Struct, kw_only=True):
    """One template's planned calls and input tokens, with the total's error bar."""

    calls: int = 0
    tokens: int = 0
    error: float = 0.0  # relative, BAR_Z standard deviations of the total
    basis: str = ""


def total_error(own: TokenFit | None, model: TokenFit | None, planned_calls: int,
                recorded_calls: int = 0) -> tuple[float, str]:
    """The relative error bar of a template's planned total and what it rests on: its own
    record (``own``), else the model's (``model``: the template's calls may miss alike, so
    one call's error), else the character rule's prior error. ``recorded_calls``: how many
    of the template's calls were recorded where that was too few to plan with."""
    if own is not None and own.calls > 0:
        sd = own.rms() * math.sqrt(1 / own.calls + 1 / max(1, planned_calls))
        return BAR_Z * sd, f"learned from {own.calls:,} answered calls of this template"
    if model is not None and model.calls > 0:
        record = (f"only {recorded_calls} calls of this template recorded" if recorded_calls
                  else "no record of this template")
        return BAR_Z * model.rms(), f"the model's ratios; {record}, whose calls may miss alike"
    return TokenEstimator.PRIOR_RELATIVE_ERROR, "the character rule"


def with_errors(planned: dict[str, PlannedInput], tokens: TokenEstimator) -> dict[str, PlannedInput]:
    """``planned`` with each template's error bar filled in from what ``tokens`` was seeded with."""
    out: dict[str, PlannedInput] = {}
    for template, p in sorted(planned.items()):
        recorded = tokens.seeded_templates.get(template)
        error, basis = total_error(tokens.template_record(template), tokens.seeded, p.calls,
                                   recorded.calls if recorded is not None else 0)
        out[template] = PlannedInput(calls=p.calls, tokens=p.tokens, error=error, basis=basis)
    return out


def overall_error(planned: dict[str, PlannedInput]) -> float:
    """The whole plan's bar: the templates' bars weighted by their tokens (a plain weighted
    mean, not in quadrature: misses under the model-wide ratios or the character rule lean
    the same way across templates, so they need not cancel)."""
    total = sum(p.tokens for p in planned.values())
    return sum(p.error * p.tokens for p in planned.values()) / total if total else 0.0
