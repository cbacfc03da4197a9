"""FACT figures from the benchmark's stored judgements (``drscore fact rescore``).

DeepResearch Bench keeps its FACT verdicts in ``validated.jsonl``: one line per report,
``{id, prompt, article, citations, citations_deduped: {url: {facts, validate_res:
[{idx, result}], validate_error}}}``. :func:`rescore_validated` folds each line into a
:class:`~drscore.engine.methods.fact.tally.FactTally` and hands the tallies to the same
aggregation a live FACT run uses (:func:`~drscore.engine.methods.fact.tally.suite_from_tallies`),
so the two can be compared figure for figure.

Mapping, as the benchmark's ``stat.py`` reads the file: a report whose ``citations`` is
empty is skipped; a URL whose ``validate_error`` is set contributes nothing (its facts
count as ``failed``); a result ``unknown`` is excluded; ``supported`` (and
``partially``, which the benchmark's judge folds into supported) is valid; any other
result is an unsupported citation.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec

from drscore.engine.methods.fact.tally import FactTally, suite_from_tallies


class _Judged(msgspec.Struct):
    result: Any = None
    idx: Any = None


class _UrlEntry(msgspec.Struct):
    facts: list[Any] = []
    validate_res: list[_Judged] | None = None
    validate_error: Any = None


class _ValidatedLine(msgspec.Struct):
    id: Any = None
    citations: Any = None
    citations_deduped: dict[str, _UrlEntry] = {}


class RescoreResult(msgspec.Struct, kw_only=True):
    """Suite figures plus what was read; ``errors`` name file and line."""

    figures: dict[str, Any]
    lines: int
    reports_with_citations: int
    urls: int
    urls_errored: int
    errors: list[str] = []


def tally_line(line: _ValidatedLine) -> tuple[FactTally | None, int, int]:
    """One report's tally (None when it cites nothing), its URL count and errored URLs."""
    if not line.citations:
        return None, len(line.citations_deduped), 0
    t = FactTally()
    errored = 0
    for entry in line.citations_deduped.values():
        if entry.validate_error is not None:
            errored += 1
            t.add("failed", max(1, len(entry.facts)))
            continue
        for judged in entry.validate_res or []:
            result = str(judged.result).strip().lower()
            t.add(result if result in ("supported", "partially", "unknown") else "unsupported")
    return t, len(line.citations_deduped), errored


def rescore_validated(path: str | Path) -> RescoreResult:
    """Read a ``validated.jsonl`` and compute the benchmark's and the paper's figures.
    Bad lines are reported (file:line) and left out; the rest are still scored."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"validated file not found: {path}")
    decoder = msgspec.json.Decoder(_ValidatedLine)
    tallies: list[FactTally | None] = []
    errors: list[str] = []
    lines = urls = errored = 0
    with open(path, "rb") as f:
        for lineno, raw in enumerate(f, 1):
            if not raw.strip():
                continue
            lines += 1
            try:
                line = decoder.decode(raw)
            except (msgspec.DecodeError, msgspec.ValidationError) as e:
                errors.append(f"{path}:{lineno}: {e}")
                continue
            tally, n_urls, n_err = tally_line(line)
            tallies.append(tally)
            urls += n_urls
            errored += n_err
    return RescoreResult(figures=suite_from_tallies(tallies), lines=lines,
                         reports_with_citations=sum(t is not None for t in tallies), urls=urls,
                         urls_errored=errored, errors=errors)
