"""A finished run as data: ``drscore.load_run(DIR)`` and flat tables for pandas, CSV
and Parquet (``drscore export``).

The score rows and the judge verdicts of a run directory, typed (:class:`ScoreRow`,
:class:`VerdictRecord`), with ``.to_pandas()`` for analysis::

    run = drscore.load_run("runs/r1")
    df = run.rows.to_pandas()            # one row per (task, agent, method)
    df.groupby(["method", "agent"]).score.mean()
    calls = run.verdicts.to_pandas()     # one row per judge call

pandas and pyarrow are an optional extra (``pip install 'drscore[pandas]'``); the typed
records and CSV export need neither.

A large run (a million rows) is read in chunks instead: ``run.iter_rows(50_000)`` and
``run.iter_verdicts(50_000)`` yield lists of records, and ``run.export_table(...)`` writes
CSV or Parquet one chunk at a time, so the file is never held twice in memory::

    run = drscore.load_run("runs/big")
    for chunk in run.iter_rows(50_000):
        ...
    run.export_table("rows.parquet", table="rows", fmt="parquet")
"""
from __future__ import annotations

import csv
import json
import math
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, Generic, TypeVar, overload

import msgspec
import numpy as np

from drscore.engine.runtime.escape import csv_cell
from drscore.engine.runtime.extras import MissingExtra
from drscore.engine.runtime.calls.ledger import LEDGER_FILE, PAID_COLUMNS, Paid, iter_paid, read_totals
from drscore.engine.runtime.calls.pace_log import PACING_COLUMNS, PACING_FILE, PaceEvent, flat_pace, read_pacing
from drscore.engine.runtime.models import InputError, ScoreRow, VerdictRecord
from drscore.engine.runtime.rundir import run_state
from drscore.engine.runtime.rundir_read import (
    RunDirError,
    _lines,
    _read_json_object,
    iter_score_rows,
    iter_verdicts,
    read_run_dir,
)

T = TypeVar("T")

EXTRA_HINT = "pip install 'drscore[pandas]'"
# The fixed columns of a flat score table, in order; subscores follow as ``sub.<name>``.
# Time is split honestly: judge_s (a call at the judge), quota_wait_s (only waiting for
# quota) and shared_wait_s (only waiting for a call shared in flight, whose judge time is
# its owner's); latency_s is the item's elapsed time, which includes all three. Money: cost_usd is
# what was paid, cost_usd_uncached what the item would have cost alone.
ROW_COLUMNS = ("task_id", "agent", "method", "score", "score_sd", "status", "coverage", "judged", "expected",
               "errors", "judge", "calls", "cache_hits", "input_tokens", "cached_input_tokens", "output_tokens",
               "reasoning_tokens", "cost_usd", "cost_usd_uncached", "judge_s", "quota_wait_s", "shared_wait_s",
               "latency_s")
VERDICT_COLUMNS = ("task_id", "agent", "method", "template", "label", "status", "cached", "error",
                   "input_tokens", "cached_input_tokens", "output_tokens", "reasoning_tokens", "cost_usd",
                   "cost_usd_uncached", "latency_s", "judge_sample", "key", "verdict")


def _require(module: str, feature: str) -> Any:
    try:
        return __import__(module)
    except ImportError:
        raise MissingExtra(f"{feature} needs the 'pandas' extra ({module} not installed): {EXTRA_HINT}") from None


class Records(Sequence[T], Generic[T]):
    """A list of typed records with a flat-table view."""

    def __init__(self, items: list[T], columns: tuple[str, ...], flatten: Any) -> None:
        self._items, self.columns, self._flatten = items, columns, flatten

    def __len__(self) -> int:
        return len(self._items)

    @overload
    def __getitem__(self, i: int) -> T: ...
    @overload
    def __getitem__(self, i: slice) -> list[T]: ...
    def __getitem__(self, i: int | slice) -> T | list[T]:
        return self._items[i]

    def __iter__(self) -> Iterator[T]:
        return iter(self._items)

    def records(self) -> list[dict[str, Any]]:
        """One flat dict per record (numbers, strings, booleans and None only)."""
        return [self._flatten(x) for x in self._items]

    def header(self, records: list[dict[str, Any]] | None = None) -> list[str]:
        """The fixed columns, then any extra ones (``sub.<name>``) in sorted order."""
        records = self.records() if records is None else records
        extra = sorted({k for r in records for k in r} - set(self.columns))
        return [*self.columns, *extra]

    def to_pandas(self) -> Any:
        """A ``pandas.DataFrame`` with one row per record (needs the pandas extra)."""
        pd = _require("pandas", "to_pandas()")
        records = self.records()
        return pd.DataFrame.from_records(records, columns=self.header(records))


def flat_row(row: ScoreRow) -> dict[str, Any]:
    """A score row as one flat record: subscores become ``sub.<name>`` columns, errors
    one ``; ``-joined string; ``details`` (nested, method-specific) is left out."""
    out: dict[str, Any] = {c: getattr(row, c) for c in ROW_COLUMNS if c != "errors"}
    out["errors"] = "; ".join(row.errors)
    for k, v in row.subscores.items():
        out[f"sub.{k}"] = v if v is None or math.isfinite(v) else None
    for k, sd in row.subscore_sd.items():  # --samples K: the spread of each subscore
        out[f"sd.{k}"] = sd if math.isfinite(sd) else None
    return out


def flat_verdict(rec: VerdictRecord) -> dict[str, Any]:
    """A verdict record as one flat record; the verdict itself as a JSON string."""
    out = {c: getattr(rec, c) for c in VERDICT_COLUMNS if c != "verdict"}
    out["verdict"] = None if rec.verdict is None else json.dumps(rec.verdict, ensure_ascii=False)
    return out


class _RowKey(msgspec.Struct):
    task_id: str = ""
    agent: str = ""
    method: str = ""
    subscores: dict[str, Any] = {}
    subscore_sd: dict[str, Any] = {}


class RunResults:
    """What :func:`load_run` returns: ``rows`` and ``verdicts`` (each read on first
    use), ``config``, ``summary`` and the ``problems`` met while reading.

    ``iter_rows`` / ``iter_verdicts`` read the same records in chunks and
    :meth:`export_table` writes them chunk by chunk, for runs too large to hold."""

    def __init__(self, path: Path) -> None:
        if not path.is_dir():
            raise RunDirError(f"{path}: not a run directory (it does not exist or is not a directory)")
        if not (path / "scores.jsonl").is_file():
            raise RunDirError(f"{path / 'scores.jsonl'}: missing; is {path} the --out directory of `drscore run`?")
        self.path = path
        self.config = _read_json_object(path / "config.json")
        self.summary = _read_json_object(path / "summary.json")
        self.problems: list[InputError] = []
        self._rows: Records[ScoreRow] | None = None
        self._verdicts: Records[VerdictRecord] | None = None

    @property
    def rows(self) -> Records[ScoreRow]:
        """Every score row, one per (task, agent, method) (the last line of a repeat)."""
        if self._rows is None:
            run = read_run_dir(self.path)
            self.problems.extend(run.problems)
            self._rows = Records(run.scores, ROW_COLUMNS, flat_row)
        return self._rows

    @property
    def verdicts(self) -> Records[VerdictRecord]:
        """Every judge call of the run (empty when the run has no verdicts.jsonl)."""
        if self._verdicts is None:
            items = [rec for chunk in self.iter_verdicts(1 << 62) for rec in chunk]
            self._verdicts = Records(items, VERDICT_COLUMNS, flat_verdict)
        return self._verdicts

    @property
    def ledger(self) -> dict[str, Any] | None:
        """What the run paid, from its ledger (``ledger.jsonl``), over every invocation:
        ``ledger["run"]["cost_usd"]``, each invocation's in ``by_invocation``, and the bound
        of calls lost in flight; None for a run without a ledger (offline, older drscore)."""
        state = run_state(self.path).get("state")
        return read_totals(self.path, running=state == "running")

    @property
    def paid_calls(self) -> Records[Paid]:
        """Every paid judge call, one per line of the ledger: invocation, cache key, method,
        task, agent, tokens, cost and seconds (``.to_pandas()`` for a DataFrame)."""
        return Records(list(iter_paid(self.path / LEDGER_FILE)), PAID_COLUMNS, msgspec.to_builtins)

    @property
    def pacing(self) -> Records[PaceEvent]:
        """How the judge endpoint was paced (``pacing.jsonl``), every invocation: each 429, each
        turn or probe of a learned pace, the learned paces every 5 s (empty for a run without it)."""
        return Records(list(read_pacing(self.path / PACING_FILE)), PACING_COLUMNS, flat_pace)

    def iter_rows(self, chunk_size: int = 50_000) -> Iterator[list[ScoreRow]]:
        """The rows of :attr:`rows`, in file order, ``chunk_size`` at a time.

        Two passes over ``scores.jsonl``: the first finds the last line of each
        (task, agent, method) (8 bytes a line), the second decodes and yields only those.
        """
        keep, _ = self._scan_rows()
        problems: list[InputError] = []
        rows = (row for i, row in enumerate(iter_score_rows(self.path / "scores.jsonl", problems))
                if i < keep.size and keep[i])
        yield from _chunked(rows, chunk_size)
        self.problems.extend(problems)

    def iter_verdicts(self, chunk_size: int = 50_000) -> Iterator[list[VerdictRecord]]:
        """Every judge call, ``chunk_size`` at a time (bad lines go to ``problems``)."""
        path = self.path / "verdicts.jsonl"
        if not path.is_file():
            return
        chunk: list[VerdictRecord] = []
        for rec in iter_verdicts(path):
            if isinstance(rec, InputError):
                self.problems.append(rec)
                continue
            chunk.append(rec)
            if len(chunk) >= chunk_size:
                yield chunk
                chunk = []
        if chunk:
            yield chunk

    def _scan_rows(self) -> tuple[np.ndarray, list[str]]:
        """(which decodable lines to keep, the extra columns (``sub.``/``sd.``) sorted)."""
        decoder = msgspec.json.Decoder(_RowKey)
        hashes: list[int] = []
        subs: set[str] = set()
        full = msgspec.json.Decoder(ScoreRow)
        for _, line in _lines(self.path / "scores.jsonl"):
            try:
                full.decode(line)  # the same lines iter_score_rows accepts
                key = decoder.decode(line)
            except (msgspec.ValidationError, msgspec.DecodeError):
                continue
            subs.update(f"sub.{k}" for k in key.subscores)
            subs.update(f"sd.{k}" for k in key.subscore_sd)
            digest = msgspec.json.encode([key.task_id, key.agent, key.method])
            hashes.append(hash(digest) & ((1 << 63) - 1))
        arr = np.asarray(hashes, dtype=np.int64)
        del hashes
        keep = np.zeros(arr.size, dtype=bool)
        if arr.size:
            _, last = np.unique(arr[::-1], return_index=True)  # first in reverse = last in file
            keep[arr.size - 1 - last] = True
        return keep, sorted(subs)

    def export_table(self, path: str | Path, *, table: str = "rows", fmt: str = "csv",
                     chunk_size: int = 10_000) -> int:
        """Write ``rows``, ``verdicts``, ``ledger`` or ``pacing`` as CSV or Parquet one chunk at a time; returns
        the number of records written. Parquet needs pyarrow (the pandas extra)."""
        if table not in ("rows", "verdicts", "ledger", "pacing") or fmt not in ("csv", "parquet"):
            raise ValueError("table must be rows|verdicts|ledger|pacing and fmt csv|parquet")
        if table == "pacing":
            header = list(PACING_COLUMNS)
            chunks: Iterator[list[dict[str, Any]]] = _chunked((flat_pace(e) for e in read_pacing(
                self.path / PACING_FILE)), chunk_size)
        elif table == "ledger":
            header = list(PAID_COLUMNS)
            paid = (msgspec.to_builtins(p) for p in iter_paid(self.path / LEDGER_FILE))
            chunks = _chunked(paid, chunk_size)
        elif table == "rows":
            _, subs = self._scan_rows()
            header = [*ROW_COLUMNS, *subs]  # as Records.header: fixed, then the extras sorted
            chunks = ([flat_row(r) for r in c] for c in self.iter_rows(chunk_size))
        else:
            header = list(VERDICT_COLUMNS)
            chunks = ([flat_verdict(r) for r in c] for c in self.iter_verdicts(chunk_size))
        if fmt == "csv":
            return _write_csv_chunks(chunks, header, Path(path))
        return _write_parquet_chunks(chunks, header, Path(path))

    def to_pandas(self) -> Any:
        """The score rows as a DataFrame (same as ``rows.to_pandas()``)."""
        return self.rows.to_pandas()

    def decisions(self, *, resamples: int = 1000, seed: int = 0, confidence: float = 0.95) -> dict[str, Any]:
        """Per method, the paired comparisons of its agents
        (:class:`drscore.engine.stats.paired.MethodDecisions`): every pair's difference on
        shared tasks with its interval, p and Holm-adjusted p, and P(ranks first). The
        defaults are those of ``summary.json`` and the report, so the numbers agree."""
        from drscore.engine.stats.paired import decide

        return dict(decide(self.rows, resamples=resamples, seed=seed, confidence=confidence))


def _chunked(items: Iterator[T], size: int) -> Iterator[list[T]]:
    chunk: list[T] = []
    for item in items:
        chunk.append(item)
        if len(chunk) >= size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def _write_csv_chunks(chunks: Iterator[list[dict[str, Any]]], header: list[str], path: Path) -> int:
    n = 0
    with open(path, "w", encoding="utf-8", newline="") as f:
        w = csv.writer(f)
        w.writerow(header)
        for chunk in chunks:
            for r in chunk:
                w.writerow(["" if r.get(c) is None else csv_cell(r.get(c)) for c in header])
            n += len(chunk)
    return n


_ARROW_TYPES = {"score": "float64", "coverage": "float64", "cost_usd": "float64", "latency_s": "float64",
                "score_sd": "float64", "cost_usd_uncached": "float64", "judge_s": "float64",
                "quota_wait_s": "float64", "shared_wait_s": "float64", "cached_input_tokens": "int64", "judge_sample": "int64",
                "judged": "int64", "expected": "int64", "calls": "int64", "cache_hits": "int64",
                "input_tokens": "int64", "output_tokens": "int64", "reasoning_tokens": "int64",
                "cached": "bool_"}


def _write_parquet_chunks(chunks: Iterator[list[dict[str, Any]]], header: list[str], path: Path) -> int:
    _require("pyarrow", "Parquet export")
    import pyarrow as pa
    import pyarrow.parquet as pq

    # One schema for every chunk (a chunk without a subscore must not change the types).
    schema = pa.schema([(c, pa.float64() if c.startswith(("sub.", "sd.")) else
                         getattr(pa, _ARROW_TYPES.get(c, "string"))()) for c in header])
    n = 0
    with pq.ParquetWriter(str(path), schema) as writer:
        for chunk in chunks:
            writer.write_table(pa.Table.from_pylist([{c: r.get(c) for c in header} for r in chunk],
                                                    schema=schema))
            n += len(chunk)
    return n


def load_run(path: str | Path) -> RunResults:
    """Load a run directory written by ``drscore run`` (see :class:`RunResults`).

    Raises :class:`drscore.engine.runtime.rundir_read.RunDirError` when ``path`` is not
    a run directory; bad lines are skipped and listed in ``problems``.
    """
    return RunResults(Path(path))


def write_csv(records: Records[Any], path: str | Path) -> int:
    """Write ``records`` as CSV (no pandas needed); returns the number of rows."""
    flat = records.records()
    header = records.header(flat)
    with open(path, "w", encoding="utf-8", newline="") as f:
        w = csv.writer(f)
        w.writerow(header)
        for r in flat:
            w.writerow(["" if r.get(c) is None else csv_cell(r.get(c)) for c in header])
    return len(flat)


def write_parquet(records: Records[Any], path: str | Path) -> int:
    """Write ``records`` as Parquet (needs pyarrow, from the pandas extra)."""
    _require("pyarrow", "Parquet export")
    import pyarrow as pa
    import pyarrow.parquet as pq

    flat = records.records()
    header = records.header(flat)
    table = pa.Table.from_pylist([{c: r.get(c) for c in header} for r in flat])
    pq.write_table(table, str(path))
    return len(flat)


__all__ = ["RunResults", "Records", "load_run", "flat_row", "flat_verdict", "write_csv", "write_parquet"]
