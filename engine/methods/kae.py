"""KAE: keypoint-aligned evaluation (DeepResearch Arena, METHODS.md §5).

Per report:

1. **Keypoints per cited page.** Every URL the report cites (numbered markers, links,
   bare URLs and reference-list entries: :func:`drscore.engine.text.citations.cited_urls`) is
   fetched once. For each page with usable text one ``kae_keypoints`` call lists up to
   ``--kae-keypoints-per-page`` task-relevant key points, each with verbatim supporting
   spans, from a window of the page chosen for the task prompt
   (:func:`drscore.engine.text.passages.select_passages`, ``--page-budget-tokens``).
2. **Verbatim check.** A key point is kept only if it has at least one span and every
   span occurs in the page text after normalisation (Unicode NFKC, case, whitespace,
   quote and dash variants) and is long enough to mean something (12 characters, or 5
   CJK characters). Dropped key points are counted (``dropped_unverified``).
3. **UEK.** Exact duplicates (same normalised text) are removed locally, then one
   ``kae_merge`` call keeps one key point per distinct fact (if it fails, the locally
   de-duplicated list is used and the row is ``partial``).
4. **Labels.** Key points are labelled against the report (citations stripped) in
   batches of ``--kae-keypoints-per-call`` (``kae_label``): SUPPORTS / OMITS / CONTRADICTS.
   A report longer than ``--kae-report-budget-tokens`` is shown as its passages most
   relevant to the batch's key points (documented in the verdict label).

Scores over labelled key points: KSR = supports/|UEK| (the row's ``score``), KCR =
contradicts/|UEK|, KOR = omits/|UEK|, each in [0, 1]. Key points whose label call
failed are left out of |UEK| and lower coverage. Without a readable cited page or a
verified key point the score is undefined (``None``, with the reason in ``errors``).

Dry runs (the page source is :class:`drscore.engine.runtime.evidence.PlaceholderPages`) cannot know how
many key points real pages yield, so the plan assumes the worst case: every page gives
``--kae-keypoints-per-page`` key points and the merge keeps them all. The planned merge and
labelling calls are therefore an upper bound, and the dry-run score means nothing.
"""
from __future__ import annotations

import asyncio
import re
import unicodedata
from typing import Annotated, Any, ClassVar, Literal

import msgspec

from drscore.engine.text.citations import cited_urls, parse_citations, strip_citations
from drscore.engine.runtime.evidence import PlaceholderPages
from drscore.engine.runtime.calls.judging import JudgeFailed
from drscore.engine.runtime.method import ItemContext, Method, MethodResult, Option, expect_calls
from drscore.engine.methods.cited_pages import (
    PAGE_OUTCOMES, page_options, batches, fetch_pages, kept_numbers, numbered, page_outcome, window_for,
)

DEFAULT_KEYPOINTS_PER_PAGE = 8
DEFAULT_KEYPOINTS_PER_CALL = 20
DEFAULT_REPORT_BUDGET = 12000
MIN_SPAN_CHARS = 12
MIN_SPAN_CJK = 5
LABELS = ("SUPPORTS", "OMITS", "CONTRADICTS")


class KaeKeypoint(msgspec.Struct, forbid_unknown_fields=True):
    point: str
    spans: list[str]


class KaeKeypoints(msgspec.Struct, forbid_unknown_fields=True):
    """Task-relevant key points of one page, each with verbatim spans from it."""

    keypoints: list[KaeKeypoint]


class KaeMerge(msgspec.Struct, forbid_unknown_fields=True):
    """Numbers (1-based) of the key points that form the de-duplicated list."""

    keep: list[Annotated[int, msgspec.Meta(ge=1)]]


class KaeLabel(msgspec.Struct, forbid_unknown_fields=True):
    keypoint: Annotated[int, msgspec.Meta(ge=1)]
    label: Literal["SUPPORTS", "OMITS", "CONTRADICTS"]


class KaeLabels(msgspec.Struct, forbid_unknown_fields=True):
    """How the report treats each numbered key point."""

    labels: list[KaeLabel]


# --------------------------------------------------------------------------- pure helpers

_QUOTES = str.maketrans({"\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"', "\u2013": "-",
                         "\u2014": "-", "\u2212": "-", "\u00a0": " "})
_WS = re.compile(r"\s+")
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u9fff\uf900-\ufaff]")


def normalise(text: str) -> str:
    """Text for verbatim comparison: NFKC, lower case, one space for any whitespace run,
    curly quotes and dashes folded to ASCII."""
    return _WS.sub(" ", unicodedata.normalize("NFKC", text).translate(_QUOTES).lower()).strip()


def span_found(span: str, normalised_page: str) -> bool:
    """True when ``span`` is long enough to mean something and occurs in the page."""
    s = normalise(span).strip(" .,;:…")
    if len(s) < MIN_SPAN_CHARS and len(_CJK.findall(s)) < MIN_SPAN_CJK:
        return False
    return s in normalised_page


def verified(keypoints: list[KaeKeypoint], page_text: str) -> tuple[list[KaeKeypoint], int]:
    """Key points whose spans all occur in ``page_text``; and how many were dropped."""
    norm = normalise(page_text)
    kept = [k for k in keypoints
            if k.point.strip() and k.spans and all(span_found(s, norm) for s in k.spans)]
    return kept, len(keypoints) - len(kept)


class KaeTally(msgspec.Struct):
    supports: int = 0
    omits: int = 0
    contradicts: int = 0
    failed: int = 0

    def add(self, label: str) -> None:
        if label == "SUPPORTS":
            self.supports += 1
        elif label == "OMITS":
            self.omits += 1
        elif label == "CONTRADICTS":
            self.contradicts += 1
        elif label == "failed":
            self.failed += 1
        else:
            raise ValueError(f"unknown KAE label {label!r}")

    @property
    def labelled(self) -> int:
        return self.supports + self.omits + self.contradicts


def kae_rates(t: KaeTally) -> dict[str, float | None]:
    """KSR, KCR, KOR over labelled key points (None when nothing was labelled)."""
    n = t.labelled
    if not n:
        return {"ksr": None, "kcr": None, "kor": None}
    return {"ksr": t.supports / n, "kcr": t.contradicts / n, "kor": t.omits / n}


def _citation_urls(text: str) -> list[str]:
    return cited_urls(parse_citations(text))


# --------------------------------------------------------------------------- the method


class Kae(Method):
    name: ClassVar[str] = "kae"
    description: ClassVar[str] = (
        "KAE (DeepResearch Arena): task key points from every cited page (verbatim-checked), merged "
        "into UEK and labelled against the report; score = KSR, with KCR and KOR")
    needs_pages: ClassVar[bool] = True
    options: ClassVar[tuple[Option, ...]] = (
        *page_options(),
        Option("kae-keypoints-per-page", "most key points asked from one cited page", DEFAULT_KEYPOINTS_PER_PAGE, "int",
               low=1),
        Option("kae-keypoints-per-call", "key points labelled per judge call (0 = all)", DEFAULT_KEYPOINTS_PER_CALL,
               "int"),
        Option("kae-report-budget-tokens", "tokens of report text per labelling call; longer reports are cut to "
               "their passages most relevant to the key points", DEFAULT_REPORT_BUDGET, "int", low=1),
        Option("kae-max-pages", "read at most this many cited pages per report, in citation order (0 = all)",
               0, "int"),
    )

    async def score(self, ctx: ItemContext) -> MethodResult:
        text = ctx.report.report
        urls = await ctx.offload(_citation_urls, text)
        cap = int(self.opts["kae_max_pages"] or 0)
        if cap > 0:
            urls = urls[:cap]
        errors: list[str] = []
        pages = await fetch_pages(ctx, urls)
        page_counts = {o: 0 for o in PAGE_OUTCOMES}
        for page in pages.values():
            page_counts[page_outcome(page)] += 1
        readable = [u for u in urls if page_outcome(pages[u]) == "ok"]

        budget = int(self.opts["page_budget_tokens"])
        per_page = int(self.opts["kae_keypoints_per_page"])
        planning = isinstance(ctx.pages, PlaceholderPages)  # dry run: plan the worst case

        async def extract(url: str) -> tuple[str, list[KaeKeypoint], int, str]:
            page = pages[url]
            window = await window_for(ctx, page.text, ctx.task.prompt, budget)
            try:
                v = await ctx.ask("kae_keypoints", KaeKeypoints, {
                    "task": ctx.task.prompt, "url": url, "page": window.text, "window": window.note("the task"),
                    "max_points": per_page}, label=f"{url} | {window.describe()}")
            except JudgeFailed as e:
                return url, [], 0, f"kae_keypoints {url}: {e}"
            if planning:
                return url, [KaeKeypoint(point=f"planned key point {n} from {url}", spans=[])
                             for n in range(1, per_page + 1)], 0, ""
            kept, dropped = await ctx.offload(verified, v.keypoints[:per_page], page.text)
            return url, kept, dropped + max(0, len(v.keypoints) - per_page), ""

        expect_calls(ctx, len(readable), "kae_keypoints")  # the merge and the labels follow
        extracted = await asyncio.gather(*(extract(u) for u in readable))
        candidates: list[tuple[str, str]] = []  # (point, url)
        seen: set[str] = set()
        dropped_unverified = 0
        extracted_n = 0
        for url, kps, dropped, err in extracted:
            dropped_unverified += dropped
            extracted_n += len(kps) + dropped
            if err:
                errors.append(err)
            for k in kps:
                key = normalise(k.point)
                if key not in seen:
                    seen.add(key)
                    candidates.append((" ".join(k.point.split()), url))

        uek = candidates
        if len(candidates) >= 2:
            expect_calls(ctx, 1, "kae_merge")
            try:
                v = await ctx.ask("kae_merge", KaeMerge, {
                    "task": ctx.task.prompt, "keypoints": numbered(p for p, _ in candidates)},
                    label=f"{len(candidates)} keypoints")
                if not planning:
                    uek = [candidates[k - 1] for k in kept_numbers(v.keep, len(candidates))]
            except JudgeFailed as e:
                errors.append(f"kae_merge: {e} (local de-duplication used)")

        labels: list[str] = ["failed"] * len(uek)
        if uek:
            plain = await ctx.offload(strip_citations, text)
            report_budget = int(self.opts["kae_report_budget_tokens"])
            groups = batches(list(range(len(uek))), int(self.opts["kae_keypoints_per_call"]))
            expect_calls(ctx, len(groups), "kae_label")

            async def label(group: list[int]) -> None:
                points = [uek[i][0] for i in group]
                window = await window_for(ctx, plain, points, report_budget)
                try:
                    v = await ctx.ask("kae_label", KaeLabels, {
                        "task": ctx.task.prompt, "report": window.text,
                        "window": window.note("these key points"),
                        "keypoints": numbered(points)}, label=f"{len(group)} keypoints | {window.describe()}")
                except JudgeFailed as e:
                    errors.append(f"kae_label: {e}")
                    return
                got: dict[int, str] = {}
                for lab in v.labels:
                    got.setdefault(lab.keypoint, lab.label)
                for k, i in enumerate(group, 1):
                    if k in got:
                        labels[i] = got[k]
                missing = sum(1 for k in range(1, len(group) + 1) if k not in got)
                if missing:
                    errors.append(f"kae_label: no label for {missing} key point(s)")

            await asyncio.gather(*(label(g) for g in groups))

        tally = KaeTally()
        for lab in labels:
            tally.add(lab)
        rates = kae_rates(tally)
        if not urls:
            errors.append("the report cites no URL")
        elif not readable:
            errors.append(f"none of the {len(urls)} cited pages could be read")
        elif not uek and not errors:
            errors.append("no verified key point on the cited pages")
        score = rates["ksr"]
        status = "failed" if score is None else ("partial" if errors else "ok")
        if not urls:
            status = "skipped"  # nothing cited: the method does not apply
        details: dict[str, Any] = {
            "pages": page_counts,
            "keypoints": {"extracted": extracted_n, "dropped_unverified": dropped_unverified,
                          "candidates": len(candidates), "uek": len(uek), "supports": tally.supports,
                          "omits": tally.omits, "contradicts": tally.contradicts, "failed": tally.failed},
            "uek": [{"point": p, "url": u, "label": lab} for (p, u), lab in zip(uek, labels)],
        }
        subscores: dict[str, float | None] = {
            **rates,
            "keypoints": float(tally.labelled),
            "extracted": float(extracted_n),
            "dropped_unverified": float(dropped_unverified),
            "urls": float(len(urls)),
            "pages_ok": float(page_counts["ok"]),
            "pages_unreachable": float(page_counts["unreachable"]),
            "pages_refused": float(page_counts["refused"]),
        }
        return MethodResult(score=score, subscores=subscores, judged=tally.labelled, expected=len(uek),
                            status=status, errors=errors[:50], details=details)
