"""Reading tasks and reports: validated, line-numbered errors, published formats.

Formats are recognised per line by their fields (or forced with ``fmt``):

========== ============================================ ==========================
format     report line                                  task line
========== ============================================ ==========================
drscore    ``{task_id, agent, report, usage?}``         ``{task_id, prompt, ...}``
drb        ``{id, prompt, article}`` (DeepResearch      ``{id, topic, language,
           Bench; agent from ``--agent`` or file name)  prompt}``
reporteval ``{topic, report}`` (task id = topic)        --
========== ============================================ ==========================

A bad line never stops the others: it becomes an :class:`InputError` naming file and line.
A file that cannot be read at all (missing, a directory, unreadable) raises
:class:`InputFileError`, one line naming the path. A UTF-8 byte-order mark is ignored.
"""
from __future__ import annotations

import hashlib
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, BinaryIO

import msgspec
import orjson

from drscore.engine.runtime.models import InputError, Report, Task
from drscore.engine.runtime.seen import SeenKeys

FORMATS = ("auto", "drscore", "drb", "reporteval")
_TASK_KNOWN = {"task_id", "id", "prompt", "topic", "language", "reference", "reference_report"}


def agent_from_path(path: str | Path) -> str:
    """``reports.claude-3-7-sonnet.jsonl`` -> ``claude-3-7-sonnet``."""
    stem = Path(path).name
    for suffix in (".jsonl", ".json", ".gz"):
        stem = stem.removesuffix(suffix)
    return stem.removeprefix("reports.").removeprefix("reports_") or "agent"


_BOM = b"\xef\xbb\xbf"


class InputFileError(ValueError):
    """An input file that cannot be read at all (the message names it and why)."""


def open_input(path: str | Path, what: str = "input") -> BinaryIO:
    """Open an input file for reading, or raise :class:`InputFileError` (one line)."""
    path = Path(path)
    if path.is_dir():
        raise InputFileError(f"{what} file {path}: is a directory, expected a JSONL file")
    try:
        return open(path, "rb")
    except FileNotFoundError:
        raise InputFileError(f"{what} file not found: {path}") from None
    except OSError as exc:
        raise InputFileError(f"{what} file {path}: cannot be read ({exc.strerror or exc})") from None


class InputFile(msgspec.Struct, frozen=True):
    """An input file by name and content: what ``drscore merge`` compares across shards
    (paths differ between machines; the same name may hold different files)."""

    role: str  # "reports" or "tasks"
    file: str  # the file name, without its directory
    sha256: str


def fingerprint(path: str | Path, role: str) -> InputFile:
    """``path``'s name and the SHA-256 of its bytes (blocking: call it in a thread)."""
    digest = hashlib.sha256()
    with open_input(path, role) as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return InputFile(role=role, file=Path(path).name, sha256=digest.hexdigest())


def _lines(path: Path, what: str = "input") -> Iterator[tuple[int, bytes]]:
    with open_input(path, what) as f:
        try:
            for lineno, raw in enumerate(f, 1):
                if lineno == 1 and raw.startswith(_BOM):
                    raw = raw[len(_BOM):]
                if raw.strip():
                    yield lineno, raw
        except OSError as exc:
            raise InputFileError(f"{what} file {path}: read failed ({exc.strerror or exc})") from None


def read_jsonl(path: str | Path, errors: list[InputError], what: str = "input") -> Iterator[tuple[str, Any]]:
    """``(origin, value)`` for each non-blank line, origin being ``file:line``.
    Malformed lines are appended to ``errors`` and skipped."""
    path = Path(path)
    for lineno, raw in _lines(path, what):
        origin = f"{path}:{lineno}"
        try:
            yield origin, orjson.loads(raw)
        except orjson.JSONDecodeError as e:
            errors.append(InputError(origin, f"malformed JSON ({e})"))


def as_id(value: Any) -> str | None:
    """A task id as text: ints and non-blank strings; anything else (bools too) is None."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, str)):
        s = str(value).strip()
        return s or None
    return None


def task_from(obj: Any) -> Task | str:
    """A task from one parsed line of a task file (drscore or DeepResearch Bench shape), or
    what is wrong with it."""
    if not isinstance(obj, dict):
        return "expected a JSON object"
    task_id = as_id(obj.get("task_id", obj.get("id")))
    if task_id is None:
        return "missing field 'task_id' (or 'id')"
    prompt = obj.get("prompt")
    if not isinstance(prompt, str) or not prompt.strip():
        return "missing or empty field 'prompt'"
    reference = obj.get("reference", obj.get("reference_report"))
    return Task(
        task_id=task_id,
        prompt=prompt,
        language=obj.get("language"),
        topic=obj.get("topic"),
        reference=reference if isinstance(reference, str) else None,
        fields={k: v for k, v in obj.items() if k not in _TASK_KNOWN},
    )


def load_tasks(path: str | Path, errors: list[InputError]) -> dict[str, Task]:
    """Read a task file (drscore or DeepResearch Bench shape) into ``{task_id: Task}``
    (a run reads its tasks through :class:`drscore.engine.runtime.task_index.TaskIndex`,
    which holds none of them in memory)."""
    path = Path(path)
    tasks: dict[str, Task] = {}
    if not path.exists():
        raise FileNotFoundError(f"tasks file not found: {path}")
    for origin, obj in read_jsonl(path, errors, "tasks"):
        task = task_from(obj)
        if isinstance(task, str):
            errors.append(InputError(origin, task))
        elif task.task_id in tasks:
            errors.append(InputError(origin, f"duplicate task id {task.task_id!r}"))
        else:
            tasks[task.task_id] = task
    return tasks


def detect_format(obj: dict[str, Any]) -> str | None:
    if "report" in obj and ("task_id" in obj or "agent" in obj):
        return "drscore"
    if "article" in obj and "id" in obj:
        return "drb"
    if "report" in obj and "topic" in obj:
        return "reporteval"
    return None


def _report_from(obj: dict[str, Any], fmt: str, agent: str | None, default_agent: str) -> Report | str:
    """Build a Report or return an error message."""
    if fmt == "drscore":
        task_id, text = as_id(obj.get("task_id")), obj.get("report")
        who = obj.get("agent") or agent
        if task_id is None:
            return "missing field 'task_id'"
        if not isinstance(who, str) or not who.strip():
            return "missing field 'agent' (or pass --agent)"
    elif fmt == "drb":
        task_id, text, who = as_id(obj.get("id")), obj.get("article"), agent or default_agent
        if task_id is None:
            return "missing field 'id'"
    else:
        topic = obj.get("topic")
        task_id = topic.strip() if isinstance(topic, str) and topic.strip() else None
        text, who = obj.get("report"), obj.get("agent") or agent or default_agent
        if task_id is None:
            return "missing field 'topic'"
    if not isinstance(text, str):
        return "missing field 'report'" if fmt != "drb" else "missing field 'article'"
    if not text.strip():
        return "empty report"
    usage = obj.get("usage")
    if usage is not None and not isinstance(usage, dict):
        return "field 'usage' must be an object"
    return Report(task_id=task_id, agent=who.strip(), report=text, usage=usage)


def iter_reports(
    path: str | Path,
    *,
    fmt: str = "auto",
    agent: str | None = None,
    tasks: Mapping[str, Task] | None = None,
    errors: list[InputError],
    seen: SeenKeys | None = None,
) -> Iterator[Report]:
    """Stream valid reports from a JSONL file; bad lines go to ``errors``.

    With ``tasks`` given, a report whose task id is unknown is an error. A second report
    for the same (task, agent) is an error too (it would silently overwrite the first);
    pass one ``seen`` (:class:`SeenKeys`, compact: 16 bytes a report) to every file of a
    run to catch duplicates across files.
    """
    if fmt not in FORMATS:
        raise ValueError(f"unknown format {fmt!r}; choose one of {', '.join(FORMATS)}")
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"reports file not found: {path}")
    default_agent = agent or agent_from_path(path)
    seen = SeenKeys() if seen is None else seen
    for origin, obj in read_jsonl(path, errors, "reports"):
        if not isinstance(obj, dict):
            errors.append(InputError(origin, "expected a JSON object"))
            continue
        line_fmt = fmt if fmt != "auto" else detect_format(obj)
        if line_fmt is None:
            errors.append(InputError(
                origin, "unrecognised report fields "
                f"{sorted(obj)[:6]}; expected {{task_id, agent, report}}, {{id, article}} or {{topic, report}}"))
            continue
        built = _report_from(obj, line_fmt, agent, default_agent)
        if isinstance(built, str):
            errors.append(InputError(origin, built))
            continue
        if tasks is not None and built.task_id not in tasks:
            errors.append(InputError(origin, f"unknown task id {built.task_id!r}"))
            continue
        first = seen.first(built.task_id, built.agent)
        if first is not None:
            errors.append(InputError(origin, f"duplicate report for task {built.task_id!r}, agent {built.agent!r} "
                                             f"(first at {first}; scored once)"))
            continue
        seen.add(built.task_id, built.agent, origin)
        built.origin = origin
        yield built


def shard_of(spec: str | None) -> tuple[int, int] | None:
    """``"K/N"`` -> (K, N) with 1 <= K <= N; None for no sharding. A bad spec is a ValueError."""
    if spec is None or spec == "":
        return None
    k, sep, n = str(spec).partition("/")
    try:
        kk, nn = int(k), int(n)
    except ValueError:
        kk = nn = 0
    if not sep or nn < 1 or not 1 <= kk <= nn:
        raise ValueError(f"--shard must be K/N with 1 <= K <= N (e.g. 2/3), got {spec!r}")
    return kk, nn


def in_shard(report: Report, k: int, n: int) -> bool:
    """Whether ``report`` belongs to shard ``k`` of ``n``: a hash of (task id, agent), so
    the split depends on nothing else (not the file order, not the machine)."""
    return shard_part(report.task_id, report.agent, n) == k


def shard_part(task_id: str, agent: str, n: int) -> int:
    """The part (1..n) that (task id, agent) falls in when the reports are split in ``n``."""
    digest = hashlib.sha256(f"{task_id}\x00{agent}".encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") % n + 1


def tasks_from_reports(path: str | Path, *, fmt: str = "auto") -> dict[str, Task]:
    """Synthesize tasks when no task file is given: DeepResearch Bench reports carry their
    prompt, ReportEval reports their topic."""
    tasks: dict[str, Task] = {}
    for _, obj in read_jsonl(path, [], "reports"):  # bad lines are reported when the reports are read
        if not isinstance(obj, dict):
            continue
        line_fmt = fmt if fmt != "auto" else detect_format(obj)
        if line_fmt == "drb":
            tid, prompt = as_id(obj.get("id")), obj.get("prompt")
        elif line_fmt == "reporteval":
            topic = obj.get("topic")
            tid = prompt = topic.strip() if isinstance(topic, str) else None
        else:
            tid, prompt = as_id(obj.get("task_id")), obj.get("prompt")
        if tid and isinstance(prompt, str) and prompt.strip() and tid not in tasks:
            tasks[tid] = Task(task_id=tid, prompt=prompt)
    return tasks


def count_lines(path: str | Path) -> int:
    """Non-blank lines (for progress totals)."""
    return sum(1 for _ in _lines(Path(path), "reports"))
