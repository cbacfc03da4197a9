"""The :class:`Method` a method file becomes: one judge call per report with the file's
template and verdict, scored by :mod:`~drscore.engine.methods.method_file.scoring`.

Each file gets a class of its own (:func:`method_class`), so the registry, the runner,
``--samples``, the cache and batch mode treat it like any built-in method: the template's
hash and the verdict's schema are in every cache key."""
from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

import msgspec
import orjson

from drscore.engine.methods.language import language_option, task_language
from drscore.engine.methods.method_file import scoring
from drscore.engine.methods.method_file.spec import MethodSpec, read
from drscore.engine.methods.method_file.verdict import verdict_type
from drscore.engine.runtime.calls.judging import JudgeFailed
from drscore.engine.runtime.method import ItemContext, Method, MethodResult
from drscore.engine.runtime.models import Report, Task


def _text(value: Any) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else orjson.dumps(value).decode()


def task_variables(task: Task, report: Report, needed: frozenset[str]) -> dict[str, str] | str:
    """The template's variables for one report, or why this task cannot be judged (a
    reference or a task field it lacks: the row is skipped with that reason)."""
    standard = {"question": task.prompt, "report": report.report, "reference": task.reference,
                "topic": task.topic, "language": task.language, "task_id": task.task_id, "agent": report.agent}
    out: dict[str, str] = {}
    for name in sorted(needed):
        if name == "reference" and not task.reference:
            return "no reference: the task has no reference report (its 'reference' field)"
        if name in standard:
            out[name] = _text(standard[name])
        elif name in task.fields:
            out[name] = _text(task.fields[name])
        else:
            return f"no task field: the task has no field {name!r}, which the template uses"
    return out


class FileMethod(Method):
    """A method declared in a TOML file (no ``name`` here: each file makes a subclass)."""

    spec: ClassVar[MethodSpec]
    verdict: ClassVar[type[msgspec.Struct]]

    async def score(self, ctx: ItemContext) -> MethodResult:
        spec = self.spec
        languages = {p.language: p for p in spec.prompts}
        language = task_language(ctx.task, self.opts.get("prompt_language") or "auto") if len(languages) > 1 else ""
        prompt = languages.get(language, languages[""])
        template = f"{spec.name}_{prompt.language}" if prompt.language else spec.name
        variables = task_variables(ctx.task, ctx.report, prompt.template.variables)
        if isinstance(variables, str):
            return MethodResult(score=None, status="skipped", errors=[variables])
        try:
            answer = await ctx.ask(template, self.verdict, variables, label=spec.name)
        except JudgeFailed as e:
            return MethodResult(score=None, judged=0, expected=1, status="failed", errors=[str(e)])
        verdict = msgspec.structs.asdict(answer)
        score = scoring.row_score(spec, verdict)
        details = scoring.details(spec, verdict)
        if language:
            details["prompt_language"] = language or "en"
        if score is None:
            return MethodResult(score=None, judged=1, expected=1, status="failed", details=details,
                                errors=["empty: the verdict's label lists are empty, no share to compute"])
        return MethodResult(score=score, subscores=scoring.subscores(spec, verdict), judged=1, expected=1,
                            details=details)


def method_class(spec: MethodSpec) -> type[FileMethod]:
    """The method class of one file: its name, description, templates and verdict type."""
    templates = {f"{spec.name}_{p.language}" if p.language else spec.name: p.text for p in spec.prompts}
    attrs: dict[str, Any] = {
        "name": spec.name, "description": spec.description, "spec": spec, "verdict": verdict_type(spec),
        "prompt_templates": templates, "options": (language_option(),) if len(spec.prompts) > 1 else (),
        "__module__": __name__, "__doc__": f"Declared in {spec.path}.",
    }
    return type(f"FileMethod[{spec.name}]", (FileMethod,), attrs)


def load(path: str | Path) -> type[FileMethod]:
    """The method declared in ``path`` (a MethodFileError naming file, line and field otherwise)."""
    return method_class(read(path))
