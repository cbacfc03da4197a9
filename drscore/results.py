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
"""
from __future__ import annotations

import csv
import json
import math
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, Generic, TypeVar, overload

from drscore.engine.runtime.escape import csv_cell
from drscore.engine.runtime.extras import MissingExtra
from drscore.engine.runtime.models import InputError, ScoreRow, VerdictRecord
from drscore.engine.runtime.rundir_read import iter_verdicts, read_run_dir

T = TypeVar("T")

EXTRA_HINT = "pip install 'drscore[pandas]'"
# The fixed columns of a flat score table, in order; subscores follow as ``sub.<name>``.
# Time is split honestly: judge_s (a call at the judge) and quota_wait_s (only waiting for
# quota); latency_s is the item's elapsed time, which includes both. Money: cost_usd is
# what was paid, cost_usd_uncached what the item would have cost alone.
ROW_COLUMNS = ("task_id", "agent", "method", "score", "score_sd", "status", "coverage", "judged", "expected",
               "errors", "judge", "calls", "cache_hits", "input_tokens", "cached_input_tokens", "output_tokens",
               "reasoning_tokens", "cost_usd", "cost_usd_uncached", "judge_s", "quota_wait_s", "latency_s")
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


class RunResults:
    """What :func:`load_run` returns: ``rows``, ``verdicts`` (read on first use),
    ``config``, ``summary`` and the ``problems`` met while reading."""

    def __init__(self, path: Path) -> None:
        run = read_run_dir(path)
        self.path = path
        self.config = run.config
        self.summary = run.summary
        self.problems: list[InputError] = list(run.problems)
        self.rows: Records[ScoreRow] = Records(run.scores, ROW_COLUMNS, flat_row)
        self._verdicts: Records[VerdictRecord] | None = None

    @property
    def verdicts(self) -> Records[VerdictRecord]:
        """Every judge call of the run (empty when the run has no verdicts.jsonl)."""
        if self._verdicts is None:
            items: list[VerdictRecord] = []
            path = self.path / "verdicts.jsonl"
            if path.is_file():
                for rec in iter_verdicts(path):
                    if isinstance(rec, InputError):
                        self.problems.append(rec)
                    else:
                        items.append(rec)
            self._verdicts = Records(items, VERDICT_COLUMNS, flat_verdict)
        return self._verdicts

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
