"""Stand-ins for the engine's ItemContext and PageSource, for unit-testing methods, and
snapshots of the engine's own records for tests that read them."""
from __future__ import annotations

import random
from typing import Annotated, Any, Callable

import msgspec

from drscore import prompts
from drscore.engine.runtime.evidence import PageResult
from drscore.engine.runtime.models import Report, Task
from drscore.engine.runtime.workload import TemplateWork
from drscore.engine.runtime.calls.verdicts import schema_of
from drscore.judge.offline import rule_for


class FakePages:
    """Canned pages: a str is page text, a str starting with '!' is a failure status;
    unknown URLs get the ``missing`` status. Records every URL requested."""

    def __init__(self, pages: dict[str, str], missing: str = "http_4xx") -> None:
        self.pages, self.missing, self.requested = pages, missing, []

    async def get(self, url: str) -> PageResult:
        self.requested.append(url)
        value = self.pages.get(url, "!" + self.missing)
        if value.startswith("!"):
            return PageResult(url=url, normalized_url=url, status=value[1:])
        return PageResult(url=url, normalized_url=url, status="ok", text=value)


class FakeContext:
    """ItemContext stand-in. ``script(template, variables, label)`` returns a verdict dict,
    an exception (raised), or None for the offline judge's rule. Every prompt is rendered,
    so a missing template variable fails the test."""

    def __init__(self, report: str, pages: Any = None,
                 script: Callable[[str, dict, str], Any] | None = None, *,
                 prompt: str = "Research chub mackerel markets.", method: str = "m") -> None:
        self.task = Task(task_id="t1", prompt=prompt)
        self.report = Report(task_id="t1", agent="a", report=report)
        self.method, self.options, self.seed, self.pages = method, {}, 0, pages
        self.script, self.calls = script, []

    async def ask(self, template, verdict, variables, *, sample=0, label=""):
        prompts.load(template).render(variables)
        self.calls.append((template, label, variables))
        answer = self.script(template, variables, label) if self.script else None
        if isinstance(answer, Exception):
            raise answer
        if answer is None:
            answer = rule_for(template)(variables, schema_of(verdict))
        return msgspec.convert(answer, verdict)

    def rng(self, *salt):
        return random.Random(repr(salt))

    async def offload(self, fn, *args):
        return fn(*args)


def template_work(**fields: Any) -> dict[str, Any]:
    """One template's entry of a workload snapshot (``Workload.snapshot``), zero but ``fields``."""
    return msgspec.structs.asdict(TemplateWork(**fields))


class Verdict(msgspec.Struct):
    """A verdict of one integer, for tests of the judge-call path."""

    score: int


class ScoreVerdict(msgspec.Struct, forbid_unknown_fields=True):
    """A verdict of one score from 0 to 4 and nothing else."""

    score: Annotated[int, msgspec.Meta(ge=0, le=4)]


def one_line_templates(monkeypatch: Any, line: str = "Rate ${i}") -> None:
    """Every prompt template becomes one user line (answers capped at 20 tokens, 5 expected):
    for tests of what happens to a call, not of what it asks."""
    monkeypatch.setattr(prompts, "load", lambda name: prompts.parse(
        name, f"---\nmax_tokens: 20\nexpected_output_tokens: 5\n---\n## user\n{line}"))
