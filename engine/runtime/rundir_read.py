"""Load analysis inputs into typed records: a run directory written by ``drscore run``
(``config.json``, ``scores.jsonl``, ``summary.json``, ``verdicts.jsonl``) and a human
scores file for ``drscore agree``.

Bad lines never abort a load: each is reported as an :class:`InputError` naming the file
and line (and the field when the decoder knows it), skipped and counted. A missing run
directory or ``scores.jsonl`` is an error (:class:`RunDirError`); a missing
``config.json`` / ``summary.json`` just reads as empty.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Callable, Iterator

import msgspec

from drscore.engine.runtime.calls.ledger import read_totals
from drscore.engine.runtime.models import InputError, ScoreRow, VerdictRecord
from drscore.engine.runtime.rundir import run_state
# natural_key: the sort key of task ids, offered here to readers of runs
from drscore.engine.runtime.task_ids import natural_key as natural_key


class HumanScore(msgspec.Struct, frozen=True, kw_only=True):
    """One human rating of one report (one line of the human scores file)."""

    task_id: str
    agent: str
    rater: str
    score: float
    dimension: str | None = None


class RunDirError(Exception):
    """A run directory (or one of its required files) cannot be read at all."""


class RunDir(msgspec.Struct, kw_only=True):
    """What one run directory holds, ready for analysis."""

    path: str
    config: dict[str, Any]
    summary: dict[str, Any]
    scores: list[ScoreRow]
    problems: list[InputError]
    duplicates: int = 0  # repeated (task, agent, method) rows; the last one is kept
    # what state.json says, corrected for a dead writer: {"state": running | finished |
    # interrupted | unknown, "detail": why, ...} (see rundir.run_state)
    state: dict[str, Any] = {}
    # The run ledger's figures (engine.runtime.calls.ledger.totals_dict): what the run paid in
    # every invocation, and the bound of calls lost in flight; None without a ledger.
    ledger: dict[str, Any] | None = None

    @property
    def finished(self) -> bool:
        """True when the run wrote its summary and ended normally."""
        return self.state.get("state", "finished") == "finished"

    def unfinished_note(self) -> str | None:
        """One sentence for reports of a run that did not finish, else None."""
        if self.finished:
            return None
        state = self.state.get("state", "unknown")
        reason = self.state.get("reason")
        detail = self.state.get("detail", "")
        why = f"{detail}" + (f"; {reason}" if reason else "")
        return (f"This run is {state.upper()} ({why}): the figures cover only the rows written so far; "
                "re-run the same command to complete it.")

    def methods(self) -> list[str]:
        """Methods present in ``scores.jsonl``, in first-seen order."""
        return list(dict.fromkeys(r.method for r in self.scores))

    def agents(self) -> list[str]:
        """Agents present in ``scores.jsonl``, sorted."""
        return sorted({r.agent for r in self.scores})


def read_run_dir(path: str | Path, *, each: Callable[[ScoreRow], ScoreRow] | None = None) -> RunDir:
    """Read ``scores.jsonl`` (required), ``config.json`` and ``summary.json``.

    A (task, agent, method) that appears on several lines keeps its last line (a
    resumed run may append), and the repeats are counted in ``duplicates``.

    ``each`` sees every decoded row in file order and returns what to keep of it: the
    report passes one that drops the bulky ``details`` (kept: what the page draws), so a
    100,000-row run is read in one pass without holding every statement and pair.
    """
    root = Path(path)
    if not root.is_dir():
        raise RunDirError(f"{root}: not a run directory (it does not exist or is not a directory)")
    scores_path = root / "scores.jsonl"
    if not scores_path.is_file():
        raise RunDirError(f"{scores_path}: missing; is {root} the --out directory of `drscore run`?")
    latest: dict[tuple[str, str, str], ScoreRow] = {}
    problems: list[InputError] = []
    state = run_state(root)
    count = 0
    for row in iter_score_rows(scores_path, problems):
        count += 1
        latest[(row.task_id, row.agent, row.method)] = each(row) if each is not None else row
    return RunDir(
        path=str(root),
        config=_read_json_object(root / "config.json"),
        summary=_read_json_object(root / "summary.json"),
        scores=list(latest.values()),
        problems=problems,
        duplicates=count - len(latest),
        state=state,
        ledger=read_totals(root, running=state.get("state") == "running"),
    )


def read_score_rows(path: str | Path) -> tuple[list[ScoreRow], list[InputError]]:
    """Decode every line of a ``scores.jsonl``; bad lines become InputErrors."""
    problems: list[InputError] = []
    rows = list(iter_score_rows(path, problems))
    return rows, problems


def iter_score_rows(path: str | Path, problems: list[InputError]) -> Iterator[ScoreRow]:
    """Stream the rows of a ``scores.jsonl``; bad lines are appended to ``problems``."""
    decoder = msgspec.json.Decoder(ScoreRow)
    for origin, line in _lines(Path(path)):
        try:
            row = decoder.decode(line)
        except msgspec.ValidationError as exc:
            problems.append(InputError(origin, f"invalid score row: {exc}"))
            continue
        except msgspec.DecodeError as exc:
            problems.append(InputError(origin, f"not valid JSON: {exc}"))
            continue
        if row.score is not None and not math.isfinite(row.score):
            row.score = None  # NaN/inf is "no score", never a number to average
        yield row


def iter_verdicts(path: str | Path) -> Iterator[VerdictRecord | InputError]:
    """Stream a ``verdicts.jsonl`` (it can be large): records, or InputErrors for bad lines."""
    decoder = msgspec.json.Decoder(VerdictRecord)
    for origin, line in _lines(Path(path)):
        try:
            yield decoder.decode(line)
        except msgspec.ValidationError as exc:
            yield InputError(origin, f"invalid verdict record: {exc}")
        except msgspec.DecodeError as exc:
            yield InputError(origin, f"not valid JSON: {exc}")


def read_human_scores(path: str | Path) -> tuple[list[HumanScore], list[InputError]]:
    """Read a human scores JSONL: one object per line with ``task_id``, ``agent``,
    ``rater``, ``score`` (a finite number) and optional ``dimension``. Task ids and
    rater ids may be numbers (they are compared as strings); other fields are ignored.
    """
    rows: list[HumanScore] = []
    problems: list[InputError] = []
    for origin, line in _lines(Path(path)):
        try:
            obj = msgspec.json.decode(line)
        except msgspec.DecodeError as exc:
            problems.append(InputError(origin, f"not valid JSON: {exc}"))
            continue
        try:
            rows.append(_human_row(obj))
        except ValueError as exc:
            problems.append(InputError(origin, str(exc)))
    return rows, problems


def _human_row(obj: Any) -> HumanScore:
    if not isinstance(obj, dict):
        raise ValueError(f"expected a JSON object, got {type(obj).__name__}")
    fields: dict[str, str] = {}
    for name in ("task_id", "agent", "rater"):
        if name not in obj:
            raise ValueError(f"missing field `{name}`")
        value = obj[name]
        if isinstance(value, bool) or not isinstance(value, (str, int)):
            raise ValueError(f"field `{name}` must be a string or integer, got {value!r}")
        if str(value) == "":
            raise ValueError(f"field `{name}` is empty")
        fields[name] = str(value)
    if "score" not in obj:
        raise ValueError("missing field `score`")
    score = obj["score"]
    if isinstance(score, bool) or not isinstance(score, (int, float)) or not math.isfinite(score):
        raise ValueError(f"field `score` must be a finite number, got {score!r}")
    dimension = obj.get("dimension")
    if dimension is not None and not isinstance(dimension, str):
        raise ValueError(f"field `dimension` must be a string or null, got {dimension!r}")
    return HumanScore(task_id=fields["task_id"], agent=fields["agent"], rater=fields["rater"],
                      score=float(score), dimension=dimension or None)


def method_scores(
    rows: list[ScoreRow], method: str, dimension: str | None = None
) -> dict[tuple[str, str], float | None]:
    """(task_id, agent) -> the method's score, or its subscore ``dimension``.

    Failed rows and missing subscores map to None (counted by the caller as not scored).
    """
    out: dict[tuple[str, str], float | None] = {}
    for row in rows:
        if row.method != method:
            continue
        value = row.score if dimension is None else row.subscores.get(dimension)
        out[(row.task_id, row.agent)] = value
    return out


def _lines(path: Path) -> Iterator[tuple[str, bytes]]:
    """(``file:line``, raw bytes) for every non-blank line (a UTF-8 byte-order mark is ignored)."""
    try:
        handle = path.open("rb")
    except OSError as exc:
        raise RunDirError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    with handle:
        for number, line in enumerate(handle, start=1):
            if number == 1:
                line = line.removeprefix(b"\xef\xbb\xbf")
            if line.strip():
                yield f"{path}:{number}", line


def _read_json_object(path: Path) -> dict[str, Any]:
    if not path.is_file():
        return {}
    try:
        value = msgspec.json.decode(path.read_bytes())
    except msgspec.DecodeError as exc:
        raise RunDirError(f"{path}: not valid JSON: {exc}") from exc
    if not isinstance(value, dict):
        raise RunDirError(f"{path}: expected a JSON object, got {type(value).__name__}")
    return value
