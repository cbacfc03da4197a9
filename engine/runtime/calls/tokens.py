"""Token estimates used before a call, corrected from the usage the API returns.

No tokenizer download is possible offline, so we estimate from characters: about four
ASCII characters a token and about one token per wide (mostly CJK) character. Real
tokenizers differ from this by script, so :class:`TokenEstimator` learns the server's
own counting from every response: a ridge regression of reported prompt tokens on the
two character classes (so a mixed Chinese/English workload is estimated right for
each request, not on average), and a running mean of completion tokens per template.
What a run learned is kept per model and per template (:class:`TokenFit`), so a dry run
plans each template's calls with that template's own ratios once earlier runs recorded it.

Where a byte-pair encoding ships with the install (``drscore[tokenizer]``), the estimates a
token quota is paced on take its counts as the two features instead (:class:`PromptFeatures`,
counted by ``drscore.judge.local_tokenizer.ProxyTokenizer``): the same regression, a third of
the character rule's miss.
"""
from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Callable, Iterable
from typing import Any, Protocol

import msgspec


def split_estimate(text: str) -> tuple[float, float]:
    """(ASCII-part tokens, wide-part tokens) by the fixed character rule."""
    if not text:
        return 0.0, 0.0
    if text.isascii():
        return len(text) / 4, 0.0
    # Counting extra UTF-8 bytes avoids a Python-level loop over long reports;
    # most wide characters (CJK) take three bytes, i.e. two extra.
    n_wide = (len(text.encode("utf-8")) - len(text)) / 2
    return max(0.0, len(text) - n_wide) / 4, n_wide


def estimate_tokens(text: str) -> int:
    """Rough token count of ``text`` (never zero for non-empty text)."""
    if not text:
        return 0
    a, w = split_estimate(text)
    return max(1, math.ceil(a + w))


def message_features(messages: Iterable, per_message: int = 4,
                     split: Callable[[Any], tuple[float, float]] = split_estimate) -> tuple[float, float]:
    """Summed (ASCII, wide) estimates of chat messages, overhead counted as ASCII; ``split``
    gives a message content's two features (a proxy tokenizer's counts: :class:`PromptFeatures`)."""
    a_total, w_total = 2.0, 0.0
    for m in messages:
        content = m["content"] if isinstance(m, dict) else m.content
        a, w = split(content)
        a_total += a + per_message
        w_total += w
    return a_total, w_total


class PromptFeatures(Protocol):
    """Counts a prompt as the estimator's two features with a tokenizer that is not the
    model's (drscore.judge.local_tokenizer.ProxyTokenizer): (tokens outside wide-character
    runs and the chat format's, tokens of those runs). ``features`` runs on a worker thread."""

    counted_by: str

    def features(self, messages: Iterable[Any]) -> tuple[float, float]: ...


# A proxy tokenizer's relative error before any usage (against the character rule's 0.3): 6%
# and 10% on 100 DeepResearch Bench reports for two encodings unlike it (bench/proxy_tokens.py),
# 32% at most (Chinese), so a little above the worse mean.
PROXY_PRIOR_ERROR = 0.12


def prompt_id(messages: Iterable) -> int:
    """Which prompt ``messages`` are, within this process (the same text asked again, as
    samples are, has the same id): a hash of their contents (each str caches its own)."""
    return hash(tuple(m["content"] if isinstance(m, dict) else m.content for m in messages))


def estimate_messages(messages: Iterable, per_message: int = 4) -> int:
    """Estimate prompt tokens of chat messages (content plus a small per-message overhead)."""
    a, w = message_features(messages, per_message)
    return max(1, math.ceil(a + w))


def _solve(saa: float, sab: float, sbb: float, say: float, sby: float, prior_strength: float,
           prior: tuple[float, float] = (1.0, 1.0)) -> tuple[float, float]:
    """Ridge regression towards ``prior`` (the character rule's (1, 1), or the model's own
    ratios for one template's fit): directions the data has not seen (e.g. no wide text
    yet) stay at the prior instead of being guessed. 2x2 solve in closed form (a numpy call
    per response costs more than the whole solve)."""
    lam = prior_strength * max(1.0, (saa + sbb) / 2)
    m11, m12, m22 = saa + lam, sab, sbb + lam
    r1, r2 = say + lam * prior[0], sby + lam * prior[1]
    det = m11 * m22 - m12 * m12
    w1, w2 = (r1 * m22 - m12 * r2) / det, (m11 * r2 - m12 * r1) / det
    return min(8.0, max(0.02, w1)), min(8.0, max(0.02, w2))


class TokenFit(msgspec.Struct, kw_only=True):
    """Every answered call's prompt count against its two character classes, summed (not
    decayed): how one model counts, kept in the cache across runs (per model) so a dry run,
    and a run's first calls, estimate with the model's own ratios instead of the character
    rule. ``rms`` is the per-call error of that estimate, relative to the count."""

    saa: float = 0.0
    sab: float = 0.0
    sbb: float = 0.0
    say: float = 0.0
    sby: float = 0.0
    syy: float = 0.0
    calls: int = 0

    def add(self, a: float, b: float, y: float) -> None:
        if self.calls >= 1_000_000:  # halve the weight of the past: the sums stay bounded, the fit adapts
            for name in ("saa", "sab", "sbb", "say", "sby", "syy"):
                setattr(self, name, getattr(self, name) / 2)
            self.calls //= 2
        self.saa += a * a
        self.sab += a * b
        self.sbb += b * b
        self.say += a * y
        self.sby += b * y
        self.syy += y * y
        self.calls += 1

    def merge(self, other: TokenFit) -> TokenFit:
        return TokenFit(saa=self.saa + other.saa, sab=self.sab + other.sab, sbb=self.sbb + other.sbb,
                        say=self.say + other.say, sby=self.sby + other.sby, syy=self.syy + other.syy,
                        calls=self.calls + other.calls)

    def weights(self, prior_strength: float = 1e-2, prior: tuple[float, float] = (1.0, 1.0)) -> tuple[float, float]:
        return _solve(self.saa, self.sab, self.sbb, self.say, self.sby, prior_strength, prior)

    def covers(self, features: tuple[float, float]) -> bool:
        """Whether the recorded calls held text of each kind ``features`` has much of (a
        tenth or more): a fit has not learned a kind of text it has barely seen (under a
        hundredth of what it recorded, by root sum of squares)."""
        a, b = features
        ra, rb = math.sqrt(self.saa), math.sqrt(self.sbb)
        if ra + rb <= 0:
            return False
        return not ((b > 0.1 * (a + b) and rb < 0.01 * (ra + rb))
                    or (a > 0.1 * (a + b) and ra < 0.01 * (ra + rb)))

    def rms(self) -> float:
        """sqrt(sum of squared misses / sum of squared counts): the per-call error relative
        to the count, weighted by size as a total is."""
        if self.syy <= 0:
            return TokenEstimator.PRIOR_RELATIVE_ERROR
        w1, w2 = self.weights()
        sse = (self.syy - 2 * (w1 * self.say + w2 * self.sby)
               + w1 * w1 * self.saa + 2 * w1 * w2 * self.sab + w2 * w2 * self.sbb)
        return math.sqrt(max(0.0, sse) / self.syy)


# A template's own record plans its calls once it holds this many answered prompts; with
# fewer, the model-wide fit (all templates together) is the surer guess.
TEMPLATE_MIN_CALLS = 5
# Prompts a template's fit remembers having seen, so the same prompt asked again (RACE's
# weight samples, --samples) counts once: repeats carry no news of how the template counts.
RECENT_PROMPTS = 4096


class RecentPrompts:
    """The last ``size`` distinct prompts seen, as (template, :func:`prompt_id`): which are
    new. Bounded, since a run of a million calls must not keep one entry a call; a prompt
    asked again (samples) comes soon after its first asking."""

    __slots__ = ("_seen", "size")

    def __init__(self, size: int = RECENT_PROMPTS) -> None:
        self._seen: OrderedDict[tuple[str, int], None] = OrderedDict()
        self.size = size

    def first_time(self, prompt: tuple[str, int]) -> bool:
        """Record ``prompt``; False when it is among the recent ones already."""
        if prompt in self._seen:
            self._seen.move_to_end(prompt)
            return False
        self._seen[prompt] = None
        if len(self._seen) > self.size:
            self._seen.popitem(last=False)
        return True


class TokenEstimator:
    """Learns the server's token counting from usage.

    Prompt tokens ~ wa * ascii + ww * wide, fitted by exponentially weighted ridge
    regression towards the prior (1, 1); completion tokens per template by an EMA
    starting at the template's declared expectation.
    """

    # The character rule's error against real tokenizers before any usage was seen (English
    # prose is close, code, URLs and CJK are not): what the limiter reserves for at first.
    PRIOR_RELATIVE_ERROR = 0.3

    def __init__(self, decay: float = 0.97, prior_strength: float = 1e-2, prior_error: float | None = None) -> None:
        """``prior_error``: the relative error before any usage (default: the character rule's)."""
        self.decay = decay
        self._err2 = (self.PRIOR_RELATIVE_ERROR if prior_error is None else prior_error) ** 2
        self.prior_strength = prior_strength
        # Sufficient statistics of the weighted least squares: X'X (symmetric) and X'y.
        self._saa = self._sab = self._sbb = self._say = self._sby = 0.0
        self.weights = (1.0, 1.0)
        self._out: dict[str, float] = {}
        self._out_var: dict[str, float] = {}  # per template: squared misses of the answer's length (tokens^2)
        self.observations = 0
        self.fit = TokenFit()  # this run's calls, summed (see TokenFit)
        self.seeded: TokenFit | None = None  # what earlier runs had recorded for this model
        # The same per template: templates differ in what their fixed text and their inputs
        # are made of, so one model-wide ratio misses each by a few percent, alike for all
        # of its calls (a dry run's total by as much).
        self.template_fits: dict[str, TokenFit] = {}
        self.seeded_templates: dict[str, TokenFit] = {}
        self._recent = RecentPrompts()
        self._template_weights: dict[str, tuple[float, float]] = {}

    def seed(self, fit: TokenFit) -> None:
        """Start from a fit earlier runs recorded: its weights now, with the weight of as many
        calls as the decayed fit remembers, so this run's answers still move it."""
        if fit.calls <= 0:
            return
        self.seeded = fit
        scale = min(1.0, (1.0 / (1.0 - self.decay)) / fit.calls)
        self._saa, self._sab, self._sbb = fit.saa * scale, fit.sab * scale, fit.sbb * scale
        self._say, self._sby = fit.say * scale, fit.sby * scale
        self.weights = fit.weights(self.prior_strength)
        self._err2 = fit.rms() ** 2

    def seed_templates(self, fits: dict[str, TokenFit]) -> None:
        """What earlier runs recorded per template (for :meth:`planned_prompt`)."""
        self.seeded_templates = {t: f for t, f in fits.items() if f.calls > 0}

    def recorded(self) -> TokenFit:
        """What to keep for the next run: the seed and this run's calls together."""
        return self.fit if self.seeded is None else self.seeded.merge(self.fit)

    def recorded_templates(self) -> dict[str, TokenFit]:
        """Per template, what to keep for the next run (the templates this run answered)."""
        seeded = self.seeded_templates
        return {t: seeded[t].merge(f) if t in seeded else f for t, f in self.template_fits.items() if f.calls}

    def template_record(self, template: str) -> TokenFit | None:
        """The recorded fit a dry run plans ``template`` with (None: too few prompts recorded)."""
        fit = self.seeded_templates.get(template)
        return fit if fit is not None and fit.calls >= TEMPLATE_MIN_CALLS else None

    def planned_prompt(self, features: tuple[float, float], template: str) -> tuple[float, bool]:
        """A dry run's prompt estimate, and whether the template's own recorded ratios made
        it: they do where earlier runs recorded enough of the template, with text of the
        kinds this prompt holds; else as :meth:`prompt`. The template's fit leans towards
        the model's ratios, not the character rule's, where its record is thin."""
        fit = self.template_record(template)
        if fit is None or not fit.covers(features):
            return self.prompt(features), False
        w = self._template_weights.get(template)
        if w is None:
            w = self._template_weights[template] = fit.weights(self.prior_strength, self.weights)
        return w[0] * features[0] + w[1] * features[1], True

    def prompt(self, features: tuple[float, float]) -> float:
        return self.weights[0] * features[0] + self.weights[1] * features[1]

    def completion(self, template: str, expected: int) -> float:
        return self._out.get(template, float(expected))

    def completion_error(self, template: str, expected: int) -> float:
        """The recent error (tokens, an exponentially weighted RMS) of :meth:`completion` for
        ``template``; before two answers, the estimator's prior relative error of ``expected``."""
        var = self._out_var.get(template)
        return math.sqrt(var) if var is not None else self.PRIOR_RELATIVE_ERROR * self.completion(template, expected)

    def estimate(self, features: tuple[float, float], template: str, expected_output: int) -> int:
        return max(1, math.ceil(self.prompt(features) + self.completion(template, expected_output)))

    def relative_error(self) -> float:
        """The recent relative error of the prompt estimate (an exponentially weighted RMS
        of (counted - estimated) / counted, each measured before the fit saw the count)."""
        return math.sqrt(self._err2)

    def observe(self, features: tuple[float, float], template: str, prompt_tokens: int,
                completion_tokens: int, prompt: int | None = None, *, prompt_known: bool = False) -> None:
        """Learn from one answer's usage. ``prompt`` (:func:`prompt_id`) tells a prompt asked
        again from a new one with the same character counts; without it, the counts do.
        ``prompt_known``: the server counted this prompt before the call (:meth:`counted`),
        so only the answer's length is new."""
        if not prompt_known:
            self._learn_prompt(features, template, prompt_tokens, prompt)
        prev = self._out.get(template)
        if prev is not None:  # the first answer's miss is the declared expectation's, not the mean's
            miss2 = (completion_tokens - prev) ** 2
            var = self._out_var.get(template)
            self._out_var[template] = miss2 if var is None else 0.8 * var + 0.2 * miss2
        self._out[template] = completion_tokens if prev is None else 0.8 * prev + 0.2 * completion_tokens

    def counted(self, features: tuple[float, float], template: str, prompt_tokens: int,
                prompt: int | None = None) -> None:
        """Learn from the server's own count of a prompt, made before its call was sent."""
        self._learn_prompt(features, template, prompt_tokens, prompt)

    def _learn_prompt(self, features: tuple[float, float], template: str, prompt_tokens: int,
                      prompt: int | None) -> None:
        if prompt_tokens > 0:
            miss = (prompt_tokens - self.prompt(features)) / prompt_tokens
            self._err2 = 0.8 * self._err2 + 0.2 * min(1.0, miss * miss)
        a, b, d = features[0], features[1], self.decay
        self._saa = d * self._saa + a * a
        self._sab = d * self._sab + a * b
        self._sbb = d * self._sbb + b * b
        self._say = d * self._say + a * prompt_tokens
        self._sby = d * self._sby + b * prompt_tokens
        self.weights = _solve(self._saa, self._sab, self._sbb, self._say, self._sby, self.prior_strength)
        self.fit.add(a, b, prompt_tokens)
        if self._recent.first_time((template, prompt if prompt is not None else hash(features))):
            fit = self.template_fits.get(template)
            if fit is None:
                fit = self.template_fits[template] = TokenFit()
            fit.add(a, b, prompt_tokens)
        self.observations += 1
