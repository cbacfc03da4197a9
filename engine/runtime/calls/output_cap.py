"""The output cap a reserving endpoint is sent, fitted to the answers its template gets.

A reserving endpoint (``quota_charge``: OpenAI, Azure OpenAI, Anthropic, Cerebras) charges each
call's whole ``max_tokens`` against its token quota when the call arrives, and OpenAI's rate-limit
guide advises setting it as close to the expected answer as possible. A template's cap is sized
for its longest plausible answer; most answers use a fraction of it (the quality template's
1,000 tokens against answers of a few hundred), so the rest is quota held for nothing while the
call runs, and on Azure's limiter given back only when the answer leaves, where a full bucket
drops it (docs/providers.md).

The cap does not change an answer (the model never sees it) unless the answer would run past
it. So where a token quota paces the calls (the pool decides: ``JudgePool._sent_cap``), after
``MIN_ANSWERS`` answers of a template, each call of it is sent with ``HEADROOM`` times the
largest answer seen, plus ``SLACK`` tokens, never above the template's cap. A template whose answers grow with their prompt (a cleaned report, a list of a report's
claims: rank correlation of answer and prompt lengths ≥ ``GROWS``) is scaled to the call's
prompt instead, by the largest answer-to-prompt ratio seen. An answer cut off at a fitted cap is
asked again at the template's cap (its prompt is paid twice: the summary's ``cut``), and the
template's fitted cap grows past it; a template cut more than ``MAX_CUT_SHARE`` of its answers
(at least twice) is sent its own cap from then on. What a run learned is kept in the cache per
model and template (:meth:`FittedCaps.kept`), so the next run fits from its first call; a
template whose text changed starts over.
"""
from __future__ import annotations

import math

import msgspec
import numpy as np

MIN_ANSWERS = 20  # answers of a template before its cap is fitted
HEADROOM = 1.5  # times the largest answer seen
SLACK = 64  # tokens above that: a short answer's own spread
GROWS = 0.3  # rank correlation of answer and prompt lengths from which the cap scales with the prompt
MAX_CUT_SHARE = 0.02  # answers cut at a fitted cap, of those seen, past which the template keeps its own cap
_SAMPLE = 256  # answers kept per template to judge whether they grow with the prompt


class TemplateCap(msgspec.Struct, kw_only=True):
    """What one template's answers have shown, across runs (kept in the cache for the next)."""

    template_hash: str = ""  # the template's text these answers were given to: another text starts over
    answers: int = 0
    largest: int = 0  # tokens, the longest answer (or a cut-off one's cap: at least that long)
    ratio: float = 0.0  # the largest answer ÷ its prompt
    grows: bool = False  # answers grow with their prompts: the cap scales with each prompt
    cut: int = 0  # answers cut off at a fitted cap (each asked again at the template's cap)
    given_up: bool = False  # cut too often: the template's own cap from then on
    thinks: bool = False  # an answer carried reasoning tokens: the model thinks, never fitted
    sample: list[tuple[int, int]] = []  # (prompt, answer) tokens of the first answers


class _ThisRun(msgspec.Struct, kw_only=True):
    earlier: int = 0  # answers earlier runs had shown (kept in the cache)
    cut: int = 0
    reserved_less: int = 0  # tokens of cap not sent (the template's cap less the fitted one, summed)


def ranks_correlate(pairs: list[tuple[int, int]]) -> float:
    """Spearman's rank correlation of the pairs (0 where either side is constant)."""
    a = np.asarray(pairs, dtype=float)
    if np.ptp(a[:, 0]) == 0 or np.ptp(a[:, 1]) == 0:
        return 0.0
    rx = np.argsort(np.argsort(a[:, 0])).astype(float)
    ry = np.argsort(np.argsort(a[:, 1])).astype(float)
    return float(np.corrcoef(rx, ry)[0, 1])


class FittedCaps:
    """Per template, the cap to send (:meth:`cap`), learned from its answers (:meth:`observe`),
    this run's and those an earlier run kept (:meth:`seed`, :meth:`kept`)."""

    def __init__(self) -> None:
        self.templates: dict[str, TemplateCap] = {}
        self._run: dict[str, _ThisRun] = {}

    def seed(self, kept: dict[str, TemplateCap]) -> None:
        """Start from what earlier runs kept."""
        for name, t in kept.items():
            self.templates[name] = t
            self._run[name] = _ThisRun(earlier=t.answers)

    def kept(self) -> dict[str, TemplateCap]:
        """What to keep for the next run: every template with an answer."""
        return {name: t for name, t in self.templates.items() if t.answers}

    def _entry(self, template: str, template_hash: str) -> TemplateCap:
        t = self.templates.get(template)
        if t is None or t.template_hash != template_hash:  # new, or its text changed: the answers may too
            t = self.templates[template] = TemplateCap(template_hash=template_hash)
            self._run[template] = _ThisRun()
        return t

    def cap(self, template: str, template_hash: str, full: int, prompt_tokens: float) -> int:
        """The cap for a call of ``template`` whose own cap is ``full`` and whose prompt is
        about ``prompt_tokens``: ``full`` until the template's answers are known."""
        t = self.templates.get(template)
        if t is None or t.template_hash != template_hash or t.answers < MIN_ANSWERS or t.given_up or t.thinks:
            return full
        longest = t.ratio * prompt_tokens if t.grows else t.largest
        return min(full, math.ceil(HEADROOM * longest) + SLACK)

    def sent(self, template: str, full: int, cap: int) -> None:
        """A call went out with ``cap`` where its template's was ``full``."""
        if cap < full and template in self._run:
            self._run[template].reserved_less += full - cap

    def observe(self, template: str, template_hash: str, prompt_tokens: int, answer_tokens: int,
                reasoning_tokens: int = 0) -> None:
        """One complete answer's usage (``reasoning_tokens``: of ``answer_tokens``, thought)."""
        t = self._entry(template, template_hash)
        t.answers += 1
        t.thinks = t.thinks or reasoning_tokens > 0
        t.largest = max(t.largest, answer_tokens)
        if prompt_tokens > 0:
            t.ratio = max(t.ratio, answer_tokens / prompt_tokens)
        if len(t.sample) < _SAMPLE:
            t.sample.append((prompt_tokens, answer_tokens))
            if len(t.sample) >= MIN_ANSWERS:
                t.grows = ranks_correlate(t.sample) >= GROWS

    def cut_off(self, template: str, template_hash: str, prompt_tokens: int, cap: int) -> None:
        """An answer was cut off at the fitted ``cap``: it is at least that long."""
        t = self._entry(template, template_hash)
        t.cut += 1
        self._run[template].cut += 1
        t.largest = max(t.largest, cap)
        if prompt_tokens > 0:
            t.ratio = max(t.ratio, cap / prompt_tokens)
        if t.cut >= 2 and t.cut > MAX_CUT_SHARE * max(1, t.answers):
            t.given_up = True

    def summary(self) -> dict[str, dict[str, int | bool]]:
        """Per template whose cap was fitted in this run: answers seen (``earlier``: of them,
        kept by earlier runs), the largest, whether the cap scales with the prompt, answers cut
        at it, and the tokens of cap not reserved."""
        out: dict[str, dict[str, int | bool]] = {}
        for name, run in sorted(self._run.items()):
            t = self.templates[name]
            if run.reserved_less or run.cut:
                out[name] = {"answers": t.answers, "earlier": run.earlier, "largest": t.largest,
                             "grows_with_prompt": t.grows, "cut": run.cut, "given_up": t.given_up,
                             "reserved_less": run.reserved_less}
        return out
