"""Thinking judges: how much room a call needs, and what a thinking model's answer is.

Thinking models (OpenAI's o-series and gpt-5, Gemini 2.5 and 3, Claude with extended
thinking, DeepSeek-R1 / Qwen3-style open models) spend hidden reasoning tokens before
they answer, bill them as output, **and count them against the output cap**. A cap sized
for the answer alone gives an empty reply cut off by length. So the cap sent is the
template's answer cap plus a reasoning allowance per family (:data:`FAMILIES`), bounded
by the model's published output ceiling (:mod:`drscore.engine.runtime.calls.windows`), or set
outright with ``--max-output-tokens``.

:class:`ThinkingPolicy` is the per-run state: the family starts from the model name, and
a model the table does not know that turns out to think (reasoning tokens in its usage,
a ``reasoning_content`` field, ``<think>`` blocks, or an empty answer cut off by length)
is adapted to once and remembered for the run. :func:`split_thinking` takes ``<think>``
blocks out of an answer so they never reach the verdict decoder.

The cache key is built from the template's answer cap, not from the cap sent, so the
keys of non-thinking models do not change (see :mod:`drscore.engine.runtime.calls.pool`).
"""
from __future__ import annotations

import re

import msgspec

from drscore.engine.runtime.calls.windows import base_model_name, window_of

EFFORTS = ("low", "medium", "high")
# A model whose output ceiling we do not know is never sent a cap above this when a cut-off
# answer is retried (most servers accept it; a server that does not says so in a 400).
UNKNOWN_MAX_OUTPUT = 32_768


class Family(msgspec.Struct, frozen=True, kw_only=True):
    """How one family of thinking models is driven.

    ``allowance``: reasoning tokens added to the answer cap, per effort (``default``: no
    effort given, the provider's own default); ``prior``: the reasoning tokens a judging
    call typically spends, per effort (the dry run's estimate until calls have answered);
    ``knob``: how an effort is spelled in the body — ``reasoning_effort`` (OpenAI, Gemini's
    compatible endpoint), ``anthropic_thinking`` (``thinking: {type: enabled,
    budget_tokens}``), or ``none`` (the cap is the only lever); ``thinks_by_default``:
    False when thinking is opt-in (Claude)."""

    name: str
    allowance: dict[str, int]
    prior: dict[str, int]
    knob: str
    thinks_by_default: bool = True


# Allowances follow each provider's guidance: OpenAI asks to reserve about 25,000 tokens
# for reasoning and output when starting with reasoning models; Gemini's compatible endpoint
# maps reasoning_effort low/medium/high to thinking budgets of 1,024/8,192/24,576 tokens
# (its default is a dynamic budget); Claude's minimum thinking budget is 1,024. The priors
# are rough means for a judging prompt (a rubric and a report), replaced by the run's own
# mean once calls answered.
FAMILIES: dict[str, Family] = {
    "openai": Family(name="openai", knob="reasoning_effort",
                     allowance={"default": 25_000, "low": 8_000, "medium": 25_000, "high": 50_000},
                     prior={"default": 2_000, "low": 800, "medium": 2_000, "high": 6_000}),
    "gemini": Family(name="gemini", knob="reasoning_effort",
                     allowance={"default": 16_384, "low": 2_048, "medium": 12_288, "high": 28_672},
                     prior={"default": 2_500, "low": 700, "medium": 2_500, "high": 6_000}),
    "claude": Family(name="claude", knob="anthropic_thinking", thinks_by_default=False,
                     allowance={"default": 0, "low": 2_048, "medium": 8_192, "high": 16_384},
                     prior={"default": 0, "low": 1_000, "medium": 3_000, "high": 6_000}),
    "open": Family(name="open", knob="none",
                   allowance={"default": 8_192, "low": 4_096, "medium": 8_192, "high": 16_384},
                   prior={"default": 1_500, "low": 800, "medium": 1_500, "high": 3_000}),
}
# Gemini's documented thinking budgets behind each reasoning_effort of its compatible endpoint.
GEMINI_BUDGETS = {"low": 1_024, "medium": 8_192, "high": 24_576}
# Claude extended thinking: budget_tokens sent per effort (minimum 1,024).
CLAUDE_BUDGETS = {"low": 1_024, "medium": 6_144, "high": 14_336}

_OPENAI = re.compile(r"^(?:o1|o3|o4)(?:$|[-_.])|^gpt-5(?:$|[-_.])")
_GEMINI = re.compile(r"^gemini-(?:2\.5|[3-9])")
_CLAUDE = re.compile(r"^claude-(?:3-7|(?:sonnet|opus|haiku)-[4-9]|[4-9])")
_OPEN = re.compile(r"^(?:deepseek-r1|deepseek-reasoner|qwq|qwen3|magistral|phi-4-reasoning|gpt-oss)"
                   r"|[-_/](?:r1|thinking|reasoner)(?:$|[-_:.])")


def family_of(model: str) -> str | None:
    """The thinking family of ``model`` (``openai``, ``gemini``, ``claude``, ``open``), or
    None for a model not known to think. A router's provider prefix is ignored."""
    name = base_model_name(model)
    short = name.rsplit("/", 1)[-1]
    if _OPENAI.match(short):
        return "openai"
    if _GEMINI.match(short):
        return "gemini"
    if _CLAUDE.match(short):
        return "claude"
    if _OPEN.search(short) or _OPEN.search(name):
        return "open"
    return None


class ThinkingPolicy:
    """The output cap of every call of one run, for one model.

    ``effort``: ``--reasoning-effort`` (None: the provider's default); ``max_output``:
    ``--max-output-tokens`` (None: answer cap + allowance); ``thinking_budget``: an explicit
    thinking budget (a protocol preset's), which becomes the allowance."""

    def __init__(self, model: str, *, effort: str | None = None, max_output: int | None = None,
                 thinking_budget: int | None = None, retry_cut_off: bool = False) -> None:
        if effort is not None and effort not in EFFORTS:
            raise ValueError(f"--reasoning-effort must be one of {', '.join(EFFORTS)}, got {effort!r}")
        if max_output is not None and max_output < 1:
            raise ValueError(f"--max-output-tokens must be at least 1, got {max_output}")
        if thinking_budget is not None and thinking_budget < 0:
            raise ValueError(f"thinking budget must be >= 0, got {thinking_budget}")
        self.model = model
        self.effort = effort
        self.max_output = max_output
        self.thinking_budget = thinking_budget
        # With an explicit --max-output-tokens a cut-off answer is `truncated` at once: a second,
        # larger paid attempt only when asked (--retry-cut-off).
        self.retry_cut_off = retry_cut_off
        # Output room beyond a template's answer cap that this run's cut-off answers showed
        # the model needs: later calls start there instead of paying a cut-off attempt first.
        self.learned_room = 0
        self.family = family_of(model)
        window = window_of(model)
        self.ceiling = window.max_output if window is not None else None
        self.learned = False  # an unknown model turned out to think (see :meth:`observe`)
        # the run's own reasoning tokens (for the dry run's estimate once calls answered)
        self.observed_calls = 0
        self.observed_reasoning = 0

    @property
    def thinking(self) -> bool:
        """Whether calls get room to think."""
        fam = self._family()
        if fam is None:
            return False
        return fam.thinks_by_default or self.effort is not None or bool(self.thinking_budget)

    def _family(self) -> Family | None:
        return FAMILIES.get(self.family) if self.family is not None else None

    def allowance(self) -> int:
        """Reasoning tokens added to the template's answer cap."""
        if not self.thinking:
            return 0
        if self.thinking_budget is not None:
            return self.thinking_budget
        fam = self._family()
        assert fam is not None
        return fam.allowance[self.effort or "default"]

    def bound(self) -> int:
        """The largest cap this run may send."""
        return self.ceiling if self.ceiling is not None else UNKNOWN_MAX_OUTPUT

    def cap(self, answer_cap: int) -> int:
        """The output cap sent for a template whose answer needs ``answer_cap`` tokens."""
        if self.max_output is not None:  # kept as given, unless --retry-cut-off let the run learn more
            return max(self.max_output, min(answer_cap + self.learned_room, self.bound())) if self.learned_room \
                else self.max_output
        cap = answer_cap  # non-thinking models: exactly what was sent before (until a cut-off)
        if self.thinking:
            cap = max(answer_cap, min(answer_cap + self.allowance(), self.bound()))
        if self.learned_room:
            cap = max(cap, min(answer_cap + self.learned_room, self.bound()))
        return cap

    def learn_cut_off(self, answer_cap: int, sent: int) -> None:
        """An answer of a template with ``answer_cap`` was cut off at ``sent``: every later
        call starts at the cap its retry gets (:meth:`raised_cap`), so a judge whose cap
        is too small pays the cut-off attempts of the calls already in flight, not of every
        call. Caps only grow; an explicit ``--max-output-tokens`` is kept as given unless
        ``retry_cut_off`` (then :meth:`raised_cap` allows more, and so does this)."""
        bigger = self.raised_cap(sent)
        if bigger is not None:
            self.learned_room = max(self.learned_room, bigger - answer_cap)

    def raised_cap(self, sent: int) -> int | None:
        """The cap of the one retry of an answer cut off at ``sent``: at least double,
        and at least one family allowance more, within the model's ceiling. None when no
        larger cap is possible (the call fails as ``truncated``), and with an explicit
        ``--max-output-tokens`` unless ``retry_cut_off``."""
        if self.max_output is not None and not self.retry_cut_off:
            return None
        fam = self._family() or FAMILIES["open"]
        room = self.thinking_budget or fam.allowance[self.effort or "default"] or FAMILIES["open"].allowance["default"]
        target = min(max(2 * sent, sent + room), self.bound())
        return target if target > sent else None

    def observe(self, *, reasoning_tokens: int, thought_visible: bool, cut_empty: bool) -> bool:
        """Learn from one answer. Returns True when this answer showed, for the first time,
        that a model not known to think does (later calls get an allowance)."""
        if reasoning_tokens > 0:
            self.observed_calls += 1
            self.observed_reasoning += reasoning_tokens
        elif self.thinking:
            self.observed_calls += 1
        if self.thinking or self.learned:
            return False
        if reasoning_tokens > 0 or thought_visible or cut_empty:
            self.learned = True
            if self.family is None or not FAMILIES[self.family].thinks_by_default:
                self.family = "open" if self.family is None else self.family
                if self.family == "claude":  # thinking on although not asked for: give it room
                    self.thinking_budget = self.thinking_budget or FAMILIES["open"].allowance["default"]
            return True
        return False

    def expected_reasoning(self) -> tuple[int, str]:
        """Reasoning tokens one call is expected to spend, and where the figure comes from
        (``learned`` mean of this run's calls, ``prior`` of the family, or ``none``)."""
        if self.observed_calls:
            return round(self.observed_reasoning / self.observed_calls), "learned"
        fam = self._family()
        if fam is None or not self.thinking:
            return 0, "none"
        if self.thinking_budget is not None:
            return min(self.thinking_budget, fam.prior[self.effort or "default"] or self.thinking_budget), "prior"
        return fam.prior[self.effort or "default"], "prior"



_CUT_OFF = frozenset({"length", "max_tokens", "max_output_tokens"})


def is_cut_off(finish_reason: str | None) -> bool:
    """Whether an answer stopped at its output cap: ``length`` (OpenAI-compatible),
    ``MAX_TOKENS`` (Gemini's native API), ``max_tokens`` (Anthropic's stop reason)."""
    return finish_reason is not None and finish_reason.lower() in _CUT_OFF


_THINK = re.compile(r"<(think|thinking|reasoning)>(.*?)</\1>", re.DOTALL | re.IGNORECASE)
_OPEN_THINK = re.compile(r"<(?:think|thinking|reasoning)>", re.IGNORECASE)


def split_thinking(text: str) -> tuple[str, str]:
    """``(answer, thought)``: ``<think>...</think>`` blocks (and ``<thinking>``,
    ``<reasoning>``) taken out of ``text``. An unclosed block (the answer was cut off while
    thinking) leaves no answer. A closing tag without an opening one (some chat templates
    put ``<think>`` in the prompt) ends the thought."""
    thoughts: list[str] = []

    def keep(m: re.Match[str]) -> str:
        thoughts.append(m.group(2))
        return ""

    answer = _THINK.sub(keep, text)
    m = _OPEN_THINK.search(answer)
    if m is not None:
        thoughts.append(answer[m.end():])
        answer = answer[:m.start()]
    low = answer.lower()
    for tag in ("</think>", "</thinking>", "</reasoning>"):
        cut = low.rfind(tag)
        if cut >= 0:
            thoughts.append(answer[:cut])
            answer = answer[cut + len(tag):]
            low = answer.lower()
    return answer.strip(), "".join(thoughts).strip()
