"""The contract every scoring method implements.

A method module defines a subclass of :class:`Method` with a unique ``name``; the
registry (:mod:`drscore.engine.methods`) discovers it. The contract lives in the runtime,
which drives methods without importing any of them. The runner creates one instance per run
(``__init__`` gets the parsed options, e.g. to load a criteria file once) and calls
:meth:`Method.score` once per report with an :class:`ItemContext`.

:class:`Method`, :class:`ItemContext` (its ``ask``, ``rng``, ``offload``, ``task``,
``report``), :class:`MethodResult` and :class:`Option` are public, stable API, exported
from ``drscore``: methods outside the package (a plugin's entry point in the group
``drscore.methods``, ``drscore run --method-module FILE``) are written against them
(docs/custom-methods.md). A change to them is a breaking change.
"""
from __future__ import annotations

import math
import random
from typing import Any, Callable, ClassVar, Protocol, TypeVar

import msgspec

from drscore.engine.runtime.calls.follow_ups import AnswerList
from drscore.engine.runtime.evidence import PageSource
from drscore.engine.runtime.models import Report, Task

T = TypeVar("T")


class Option(msgspec.Struct, frozen=True):
    """A method option exposed as ``drscore run --<flag>`` and in the Python API."""

    flag: str  # e.g. "criteria" -> --criteria
    help: str
    default: Any = None
    type: str = "str"  # str | int | float | bool | path
    choices: tuple[str, ...] | None = None
    # int and float options: the allowed range, checked before a run starts (counts and
    # budgets are never negative; a size that must be at least 1 says so)
    low: float = 0.0
    high: float = math.inf


class MethodResult(msgspec.Struct, kw_only=True):
    """What a method returns for one report; the runner adds judge, tokens, cost, latency."""

    score: float | None
    subscores: dict[str, float | None] = {}
    judged: int = 0
    expected: int = 0
    # ok | partial | failed | skipped (the method does not apply to this report, e.g. it
    # cites nothing; errors[0] says why as "reason: detail")
    status: str = "ok"
    errors: list[str] = []
    details: dict[str, Any] = {}


class ItemContext(Protocol):
    """Everything a method may use while scoring one report."""

    task: Task
    report: Report
    method: str
    options: dict[str, Any]
    seed: int
    pages: PageSource | None
    # The judge's model name ("" when unknown), e.g. to size a page to its context window
    # (drscore.engine.runtime.calls.windows); read it with getattr(ctx, "judge_model", "").
    judge_model: str

    async def ask(
        self,
        template: str,
        verdict: type[T],
        variables: dict[str, Any],
        *,
        sample: int = 0,
        label: str = "",
    ) -> T:
        """Render ``prompts/<template>.md`` with ``variables``, ask the judge for a
        ``verdict`` Struct (its JSON Schema is the response format) and decode it.
        Raises :class:`drscore.engine.runtime.calls.judging.JudgeFailed` after bounded retries."""

    def output_cap(self, template: str) -> int:
        """The output cap a call of ``template`` is sent (answer cap plus a thinking
        judge's allowance): room the judge's context must leave besides the prompt."""

    def rng(self, *salt: Any) -> random.Random:
        """A generator seeded by the run seed, task, agent, method and ``salt``."""

    async def offload(self, fn: Callable[..., T], *args: Any) -> T:
        """Run CPU-heavy ``fn(*args)`` off the event loop."""


def expect_calls(ctx: ItemContext, n: int, template: str, text: str = "") -> None:
    """Say that this item is about to make ``n`` more asks of ``template`` (the name
    passed to ``ctx.ask``), as soon as it knows: the pairs drawn, a checklist's items, a
    page's statement batches. ``text``: what each of those calls mostly carries (the
    report, a page), so their tokens are known before the first one is answered.

    Additive, and a first guess may be corrected (``n`` negative: fewer than said).
    Optional: the progress display counts calls done and left with it, so its ETA need
    not wait for items to finish (:mod:`drscore.engine.runtime.workload`); a context that
    does not count (a test's fake) ignores it."""
    say = getattr(ctx, "expect_calls", None)
    if say is not None:
        say(n, template, text)


class Method:
    name: ClassVar[str]
    description: ClassVar[str] = ""
    options: ClassVar[tuple[Option, ...]] = ()
    needs_pages: ClassVar[bool] = False
    # How --samples K combines the K scores of one report (engine.runtime.samples):
    # "mean", or "median" where a method's paper says so.
    sample_aggregate: ClassVar[str] = "mean"
    # Prompt templates a method from outside the package brings, by name: the template's
    # text (front matter and ``## system`` / ``## user`` sections, as prompts/*.md). They are
    # registered with the method, so ``ctx.ask(name, ...)`` finds them; built-in methods
    # keep theirs in prompts/.
    prompt_templates: ClassVar[dict[str, str]] = {}
    # Answers whose list decides how many calls follow, by template (ACE's checklist: one
    # call per item). A dry run plans them as long as this judge model wrote them before
    # (:mod:`drscore.engine.runtime.calls.follow_ups`), else with the published figure.
    answer_lists: ClassVar[dict[str, AnswerList]] = {}

    def __init__(self, options: dict[str, Any] | None = None) -> None:
        self.opts: dict[str, Any] = {o.flag.replace("-", "_"): o.default for o in self.options}
        self.opts.update({k: v for k, v in (options or {}).items() if v is not None})

    async def score(self, ctx: ItemContext) -> MethodResult:  # pragma: no cover - abstract
        raise NotImplementedError

    @classmethod
    def suite(cls, entry: dict[str, Any]) -> dict[str, Any] | None:
        """Suite-level figures that are not a mean of row scores (e.g. FACT's pooled
        valid rate), computed from the run summary's entry for one agent; None if none."""
        return None

    def notes(self) -> list[str]:
        """Plain statements about this run's configuration that readers of the
        leaderboard must see (e.g. scores not comparable with the published ones)."""
        return []
