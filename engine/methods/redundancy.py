"""Redundancy (DeepResearch-ReportEval, METHODS.md §3): how much a report repeats itself.

The report is cut into units (:mod:`drscore.engine.text.segment`), the first and last unit are set
aside (introductions and conclusions may legitimately restate the body), and pairs of
the remaining ``k`` units are judged with ``redundancy_pair``: 0-4, 4 = no repetition.
The report's score is the mean pair score.

Two protocols (``--redundancy-protocol``):

``sampled`` (default, the published protocol)
    At most ``--redundancy-max-pairs`` (30) pairs, drawn without replacement from
    the k(k-1)/2 pairs with ``ctx.rng("redundancy")`` (the authors' code does not
    seed its sample; we do, so runs repeat). With fewer pairs than the cap, all of
    them are judged.

``full``
    Every pair is considered. All k(k-1)/2 pairs are screened locally by
    :func:`drscore.engine.text.similarity.screen` (character n-gram TF-IDF cosine, off the event
    loop); only pairs at or above ``--screen-threshold`` are judged, the rest are
    *screened out* and count as 4 ("no repetition") in the mean.

Segmentation (``--segmentation``): ``paragraphs`` (default, the published protocol: the
paper divides reports into blank-line paragraphs, headings, tables, code and reference
lists excluded, and reports 25-30 judged pairs per report) or ``sections``, as the
authors' released script does (``## `` sections, units with links or under 200
characters dropped). On the 100 DeepResearch Bench reports the script's sections leave
about 9 pairs per report, so ``sections`` numbers are not comparable with the paper's
tables; they reproduce what the released script computes.
"""
from __future__ import annotations

import asyncio
from collections.abc import Iterable, Iterator, Sequence
from typing import Annotated, Any, ClassVar

import msgspec

from drscore.engine.runtime.calls.judging import JudgeFailed
from drscore.engine.runtime.method import ItemContext, Method, MethodResult, Option, expect_calls
from drscore.engine.methods.language import language_option, task_language, template_for
from drscore.engine.text.segment import DEFAULT_MIN_CHARS, Unit, segment
from drscore.engine.text.similarity import DEFAULT_THRESHOLD, ScreenResult, pair_at, pair_count, screen

PROTOCOLS: tuple[str, ...] = ("sampled", "full")
SEGMENTATIONS: tuple[str, ...] = ("paragraphs", "sections")
NO_REPETITION = 4  # the scale's top: what a screened-out pair scores
MAX_LISTED_PAIRS = 5000  # cap on details["pairs"] (a 200-paragraph report has 19,900)
MAX_ERRORS = 20  # error messages kept per report; the rest are counted
WINDOW = 256  # judge calls of one report in flight at once (the pool limits further)


class RedundancyPairVerdict(msgspec.Struct, forbid_unknown_fields=True):
    """How much two passages of one report repeat each other (4 = not at all)."""

    reason: str
    score: Annotated[int, msgspec.Meta(ge=0, le=4)]


class PairOutcome(msgspec.Struct, frozen=True):
    """One compared pair: unit indices (as in :func:`drscore.engine.text.segment.segment`'s
    output), the 0-4 score (None when the judge failed) and where it came from."""

    i: int
    j: int
    score: int | None
    source: str  # judged | screened | failed
    error: str = ""


class Prepared(msgspec.Struct, kw_only=True):
    """Segmentation and (full protocol) screening of one report."""

    units: list[Unit]  # every unit after segmentation
    compared: list[Unit]  # units[1:-1]: the ones paired
    screened: ScreenResult | None = None


def exclude_ends(units: Sequence[Unit]) -> list[Unit]:
    """The units that are paired: all but the first and the last."""
    return list(units[1:-1])


def sample_pairs(k: int, cap: int, rng: Any) -> list[tuple[int, int]]:
    """Pairs ``(a, b)``, ``a < b``, of ``k`` units: all of them if there are at most
    ``cap``, else ``cap`` distinct ones drawn with ``rng`` (a ``random.Random``).
    Pair numbers are sampled from a ``range``, so the k(k-1)/2 pairs are never
    listed. Returned in row-major order."""
    total = pair_count(k)
    if total <= cap:
        return [pair_at(k, p) for p in range(total)]
    return [pair_at(k, p) for p in sorted(rng.sample(range(total), cap))]


def redundancy_score(judged: Sequence[int], screened_out: int = 0) -> float | None:
    """Mean pair score, screened-out pairs counting as 4; None without any pair.
    E.g. judged [0, 2] and 13 screened out: (0 + 2 + 4*13) / 15 = 54 / 15 = 3.6."""
    n = len(judged) + screened_out
    if n == 0:
        return None
    return (sum(judged) + NO_REPETITION * screened_out) / n


def listed_pairs(
    outcomes: Sequence[PairOutcome], screened: Iterable[tuple[int, int]], cap: int = MAX_LISTED_PAIRS
) -> tuple[list[list[Any]], bool]:
    """``[i, j, score, source]`` rows for ``details["pairs"]``: every judged or failed
    pair first, then screened-out pairs, at most ``cap`` rows. Returns the rows and
    whether the list was cut."""
    rows: list[list[Any]] = [[o.i, o.j, o.score, o.source] for o in outcomes[:cap]]
    if len(outcomes) > cap:
        return rows, True
    for i, j in screened:
        if len(rows) == cap:
            return rows, True
        rows.append([i, j, NO_REPETITION, "screened"])
    return rows, False


def screened_out_pairs(result: ScreenResult, offset: int) -> Iterator[tuple[int, int]]:
    """Screened-out pairs in row-major order, as unit indices (``offset`` added);
    lazy, so a caller that stops early never walks all k(k-1)/2 pairs."""
    candidates = {(int(a), int(b)) for a, b in result.pairs}
    k = result.units
    for a in range(k):
        for b in range(a + 1, k):
            if (a, b) not in candidates:
                yield a + offset, b + offset


def prepare(
    text: str, mode: str, min_chars: int | None, protocol: str, threshold: float
) -> Prepared:
    """Segment the report and, for the full protocol, screen all pairs of the
    compared units. Pure and CPU-bound: run through ``ctx.offload``."""
    units = segment(text, mode, min_chars=min_chars)  # type: ignore[arg-type]
    compared = exclude_ends(units)
    screened = None
    if protocol == "full" and len(compared) >= 2:
        screened = screen([u.text for u in compared], threshold)
    return Prepared(units=units, compared=compared, screened=screened)


class Redundancy(Method):
    name: ClassVar[str] = "redundancy"
    description: ClassVar[str] = (
        "DeepResearch-ReportEval redundancy: unit pairs judged 0-4 (4 = no repetition), first and "
        "last unit excluded; score = mean pair score. Protocols: sampled (published, <= 30 "
        "seeded pairs) or full (every pair, locally screened)"
    )
    options: ClassVar[tuple[Option, ...]] = (
        Option("redundancy-protocol", "sampled = published protocol (seeded sample of at most "
               "--redundancy-max-pairs pairs); full = every pair, screened locally so only similar "
               "pairs are judged", "sampled", "str", PROTOCOLS),
        Option("redundancy-max-pairs", "pairs judged per report under the sampled protocol",
               30, "int", low=1),
        Option("segmentation", "redundancy units: paragraphs (the published protocol: blank-line "
               "paragraphs) or sections, as the authors' released script does ('## ' sections, no links, "
               ">= 200 chars)", "paragraphs", "str", SEGMENTATIONS),
        Option("screen-threshold", "full protocol: pairs whose n-gram cosine similarity is at least "
               "this are judged, the rest score 4 (0 = judge every pair)", DEFAULT_THRESHOLD, "float",
               high=1.0),
        Option("redundancy-min-chars", "drop units shorter than this many characters (default: "
               f"{DEFAULT_MIN_CHARS['sections']} for sections, {DEFAULT_MIN_CHARS['paragraphs']} "
               "for paragraphs)", None, "int"),
        language_option(),
    )

    def __init__(self, options: dict[str, Any] | None = None) -> None:
        super().__init__(options)
        o = self.opts
        if o["redundancy_protocol"] not in PROTOCOLS:
            raise ValueError(f"--redundancy-protocol must be one of {', '.join(PROTOCOLS)}, "
                             f"not {o['redundancy_protocol']!r}")
        if o["segmentation"] not in SEGMENTATIONS:
            raise ValueError(f"--segmentation must be one of {', '.join(SEGMENTATIONS)}, "
                             f"not {o['segmentation']!r}")
        o["redundancy_max_pairs"] = int(o["redundancy_max_pairs"])
        if o["redundancy_max_pairs"] < 1:
            raise ValueError("--redundancy-max-pairs must be at least 1")
        o["screen_threshold"] = float(o["screen_threshold"])
        if not 0.0 <= o["screen_threshold"] <= 1.0:
            raise ValueError(f"--screen-threshold must be within [0, 1], not {o['screen_threshold']}")
        if o["redundancy_min_chars"] is not None:
            o["redundancy_min_chars"] = int(o["redundancy_min_chars"])
            if o["redundancy_min_chars"] < 0:
                raise ValueError("--redundancy-min-chars must be >= 0")

    async def score(self, ctx: ItemContext) -> MethodResult:
        o = self.opts
        protocol = o["redundancy_protocol"]
        mode = o["segmentation"]
        prep = await ctx.offload(prepare, ctx.report.report, mode, o["redundancy_min_chars"],
                                 protocol, o["screen_threshold"])
        k = len(prep.compared)
        details: dict[str, Any] = {
            "protocol": protocol,
            "segmentation": mode,
            "units": len(prep.units),
            "compared_units": k,
            # [unit index, report line] of each compared unit, to read details["pairs"]
            # against the report.
            "unit_lines": [[u.index, u.line] for u in prep.compared],
            "prompt_language": task_language(ctx.task, o["prompt_language"]),
        }
        if k < 2:
            return MethodResult(  # not applicable rather than broken: nothing to compare
                score=None, status="skipped", details=details,
                subscores=_subscores(len(prep.units), 0, 0, 0, 0, 0),
                errors=[f"too_few_units: {len(prep.units)} unit(s) after {mode} segmentation; at least 4 "
                        "are needed so that 2 remain once the first and last are excluded"
                        + (" (try --segmentation paragraphs)" if mode == "sections" else "")],
            )
        total = pair_count(k)
        # Positions in prep.compared are 0..k-1; unit indices are one more (units[0]
        # is excluded).
        if protocol == "sampled":
            cap = o["redundancy_max_pairs"]
            positions = sample_pairs(k, cap, ctx.rng("redundancy"))
            details["max_pairs"] = cap
            screened_out = 0
        else:
            assert prep.screened is not None
            positions = [(int(a), int(b)) for a, b in prep.screened.pairs]
            screened_out = prep.screened.screened_out
            details["screen_threshold"] = prep.screened.threshold
        template = template_for("redundancy_pair", details["prompt_language"])
        expect_calls(ctx, len(positions), template)
        outcomes = await _judge_pairs(ctx, prep.compared, positions, template)
        judged = [oc.score for oc in outcomes if oc.score is not None]
        failed = [oc for oc in outcomes if oc.score is None]
        screened_iter = screened_out_pairs(prep.screened, 1) if prep.screened is not None else iter(())
        details["pairs"], details["pairs_truncated"] = listed_pairs(outcomes, screened_iter)
        if details["pairs_truncated"]:
            details["pairs_note"] = (f"first {MAX_LISTED_PAIRS} of {total} pairs listed: judged and "
                                     "failed pairs first, then screened-out pairs in order")
        errors = [f"pair {oc.i}-{oc.j}: {oc.error}" for oc in failed[:MAX_ERRORS]]
        if len(failed) > MAX_ERRORS:
            errors.append(f"... and {len(failed) - MAX_ERRORS} more failed pairs")
        subscores = _subscores(len(prep.units), total, len(judged), len(failed), screened_out,
                               total - len(positions) - screened_out)
        score = redundancy_score(judged, screened_out)
        if positions and not judged:
            score, status = None, "failed"  # screened pairs alone would fake a clean 4.0
        else:
            status = "partial" if failed else "ok"
        return MethodResult(score=score, subscores=subscores, judged=len(judged),
                            expected=len(positions), status=status, errors=errors, details=details)


def _subscores(units: int, total: int, judged: int, failed: int, screened_out: int,
               unsampled: int) -> dict[str, float | None]:
    return {
        "units": float(units),
        "pairs_total": float(total),
        "pairs_judged": float(judged),
        "pairs_failed": float(failed),
        "pairs_screened_out": float(screened_out),
        "pairs_unsampled": float(unsampled),
    }


async def _judge_pairs(
    ctx: ItemContext, compared: Sequence[Unit], positions: Iterable[tuple[int, int]],
    template: str = "redundancy_pair",
) -> list[PairOutcome]:
    """Judge each pair of positions in ``compared``, keeping at most :data:`WINDOW`
    calls of this report in flight; outcomes in the order of ``positions``."""

    async def judge(a: int, b: int) -> PairOutcome:
        ua, ub = compared[a], compared[b]
        try:
            v = await ctx.ask(template, RedundancyPairVerdict,
                              {"passage_a": ua.text, "passage_b": ub.text},
                              label=f"pair {ua.index}-{ub.index}")
        except JudgeFailed as e:
            return PairOutcome(ua.index, ub.index, None, "failed", str(e))
        return PairOutcome(ua.index, ub.index, v.score, "judged")

    results: dict[int, PairOutcome] = {}
    pending: dict[asyncio.Task[PairOutcome], int] = {}
    try:
        for n, (a, b) in enumerate(positions):
            if len(pending) >= WINDOW:
                await _collect(pending, results)
            pending[asyncio.ensure_future(judge(a, b))] = n
        while pending:
            await _collect(pending, results)
    finally:
        for task in pending:  # only left on an unexpected error or a cancel: do not leak calls
            task.cancel()
        if pending:  # and let them end before the item does (none writes after the run closed)
            await asyncio.gather(*pending, return_exceptions=True)
    return [results[n] for n in range(len(results))]


async def _collect(pending: dict[asyncio.Task[PairOutcome], int], results: dict[int, PairOutcome]) -> None:
    done, _ = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
    for task in done:
        results[pending.pop(task)] = task.result()  # re-raises anything but JudgeFailed
