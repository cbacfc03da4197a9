"""A dry run's input tokens per template, and the error bar of each total.

One call's error does not average out over a template's calls. They share the template's
fixed text and inputs of one kind, so under the model-wide ratios (all templates fitted
together) they miss alike: the total by about as much as a call. A template's own recorded
ratios (:meth:`TokenEstimator.planned_prompt`) remove that shared miss; what is left is its
per-call error, averaged over the distinct prompts planned and those it was learned from.
Each bar is two standard deviations, relative to the template's planned tokens. Prompts
counted with the model's tokenizer (``--tokenizer``) are exact but for the chat format's tokens.
"""
from __future__ import annotations

import math

import msgspec

from drscore.engine.runtime.calls.tokens import TokenEstimator, TokenFit

# Standard deviations a bar spans: the total falls outside it about one time in twenty.
BAR_Z = 2.0
# Prompts counted with the model's tokenizer (--tokenizer) are exact but for the chat format's
# tokens, counted as OpenAI's 3 a message and 3 for the reply: a chat template adds up to about
# this many more or fewer to a prompt of two messages (Llama 3's and Qwen's add 4-5 a message).
COUNT_SLACK = 12


class PlannedInput(msgspec.Struct, kw_only=True):
    """One template's planned calls and input tokens, with the total's error bar."""

    calls: int = 0
    tokens: int = 0
    own_tokens: int = 0  # planned with the template's own ratios
    own_prompts: int = 0  # distinct prompts among those (a prompt asked again adds no news)
    counted_tokens: int = 0  # counted with the model's tokenizer (--tokenizer)
    error: float = 0.0  # relative, BAR_Z standard deviations of the total
    basis: str = ""

    def add(self, tokens: int, own: bool, new_prompt: bool, counted: bool = False) -> None:
        self.calls += 1
        self.tokens += tokens
        if counted:
            self.counted_tokens += tokens
        elif own:
            self.own_tokens += tokens
            self.own_prompts += new_prompt


def own_error(own: TokenFit, planned_prompts: int) -> float:
    """The bar of a total planned with a template's own ratios: its per-call error (measured
    on the prompts the two ratios were fitted to, so widened by n / (n - 2)), over the
    prompts recorded and the prompts planned."""
    n = own.calls
    rms = own.rms() * math.sqrt(n / (n - 2)) if n > 2 else TokenEstimator.PRIOR_RELATIVE_ERROR
    return BAR_Z * rms * math.sqrt(1 / max(1, n) + 1 / max(1, planned_prompts))


def shared_error(model: TokenFit | None) -> tuple[float, str]:
    """The bar of a total planned without the template's own ratios: the model's (its calls
    may miss alike, so two of one call's standard deviations), or the character rule's."""
    if model is not None and model.calls > 0:
        return BAR_Z * model.rms(), "the model's ratios"
    return TokenEstimator.PRIOR_RELATIVE_ERROR, \
        "the character rule; real tokenizers differ from it by up to about 30% on text of one language"


def counted_basis(counted_by: str) -> str:
    return f"counted with {counted_by}, the chat format's tokens within about {COUNT_SLACK} a prompt"


def with_errors(planned: dict[str, PlannedInput], tokens: TokenEstimator,
                counted_by: str | None = None) -> dict[str, PlannedInput]:
    """``planned`` with each template's error bar filled in from what ``tokens`` was seeded
    with; prompts counted with the model's tokenizer (``counted_by``) miss only the chat
    format's few tokens (:data:`COUNT_SLACK`)."""
    out: dict[str, PlannedInput] = {}
    shared, shared_basis = shared_error(tokens.seeded)
    for template, p in sorted(planned.items()):
        if counted_by is not None and p.tokens and p.counted_tokens == p.tokens:
            out[template] = msgspec.structs.replace(p, error=COUNT_SLACK * p.calls / p.tokens,
                                                    basis=counted_basis(counted_by))
            continue
        own = tokens.template_record(template)
        recorded = tokens.seeded_templates.get(template)
        if own is not None and p.own_tokens:
            mine = own_error(own, p.own_prompts)
            error = (mine * p.own_tokens + shared * (p.tokens - p.own_tokens)) / max(1, p.tokens)
            basis = f"learned from {own.calls:,} answered prompts of this template"
            if p.own_tokens < p.tokens:
                basis += (f" for {p.own_tokens / p.tokens:.0%} of its tokens; {shared_basis} for text of "
                          "a kind it has not recorded")
        else:
            error = shared
            if tokens.seeded is None:
                basis = shared_basis
            elif own is not None:
                basis = f"{shared_basis}; this template's record holds no text of the kinds planned"
            elif recorded is not None:
                basis = f"{shared_basis}; only {recorded.calls} prompts of this template recorded, whose calls may miss alike"
            else:
                basis = f"{shared_basis}; no record of this template, whose calls may miss alike"
        out[template] = msgspec.structs.replace(p, error=error, basis=basis)
    return out


def overall_error(planned: dict[str, PlannedInput]) -> float:
    """The whole plan's bar: the templates' bars weighted by their tokens (a plain weighted
    mean, not in quadrature: misses under the model-wide ratios or the character rule lean
    the same way across templates, so they need not cancel)."""
    total = sum(p.tokens for p in planned.values())
    return sum(p.error * p.tokens for p in planned.values()) / total if total else 0.0
