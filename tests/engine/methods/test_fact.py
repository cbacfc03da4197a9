"""FACT with a fake context: pairs, de-duplication, support, the benchmark's convention
(partial counts, unknown excluded, pooled valid rate) and the paper's stricter one."""
from __future__ import annotations

import asyncio
import functools
import math
import random

import orjson
import pytest
from support.fakes import FakeContext, FakePages

from drscore.engine.text.citations import parse_citations
from drscore.engine.runtime.evidence import PageResult, PlaceholderPages
from drscore.engine.runtime.calls.judging import JudgeFailed
from drscore.engine.methods import get
from drscore.engine.methods.cited_pages import chunk_report, kept_numbers
from drscore.engine.methods.fact.method import Fact
from drscore.engine.methods.fact.tally import fact_suite, fact_suite_by_agent
from drscore.engine.runtime.models import Report, ScoreRow, Task
from drscore.engine.runtime.calls.tokens import estimate_tokens
from drscore.judge.offline import rules
from support.data import drb_report
from support.serve import serve


FakeContext = functools.partial(FakeContext, method="fact")

REPORT = """Mackerel prices rose 12% in 2023 [1]. Prices climbed by twelve percent last year [1].
Japan landed 376,600 tons in 2020 [2]. The stock has declined since the 1980s [3].
Catches peaked in the late 1970s [4].

References
[1] https://a.example/prices - Prices
[2] https://b.example/catch - Catch
[3] https://c.example/dead - Gone
[4] http://10.0.0.1/internal - Internal
"""
PAGES = {
    "https://a.example/prices": "Mackerel prices rose 12% in 2023, the ministry said.",
    "https://b.example/catch": "Japan landed 300,000 tons in 2020.",
    "https://c.example/dead": "!http_4xx",
    "http://10.0.0.1/internal": "!ssrf_refused",
}


def scripted(overrides=None):
    """Dedup keeps statement 1; support: page a supports, page b does not."""
    overrides = overrides or {}

    def script(template, variables, label):
        key = (template, variables.get("url"))
        if key in overrides:
            value = overrides[key]
            if isinstance(value, Exception):
                raise value
            return value
        if template == "fact_dedup":
            return {"keep": [1]}
        if template == "fact_support":
            n = len(variables["statements"].splitlines())
            verdict = "supported" if variables["url"] == "https://a.example/prices" else "unsupported"
            return {"judgments": [{"statement": i, "verdict": verdict} for i in range(1, n + 1)]}
        return None

    return script


def run(ctx, **opts):
    return asyncio.run(Fact(opts).score(ctx))


def test_registered_with_options():
    cls = get("fact")
    assert cls is Fact and cls.needs_pages
    assert {o.flag for o in cls.options} >= {"page-budget-tokens", "citation-extractor", "statement-scope",
                                             "fact-statements-per-call", "extract-chunk-tokens"}


def test_outcomes_and_both_accuracy_conventions():
    ctx = FakeContext(REPORT, FakePages(PAGES), scripted())
    res = run(ctx)
    # 5 parsed pairs; URL a's two statements de-duplicate to 1 -> N_u = 4:
    # a supported, b unsupported, c unreachable (4xx), d refused (SSRF guard).
    # benchmark: unreadable pages are unknown, excluded: 1 / (1 + 1) = 0.5
    # paper: 1 / (1 + 1 + 1 + 1) = 0.25
    assert res.score == pytest.approx(0.5)
    assert res.subscores["valid_rate"] == pytest.approx(0.5)
    assert res.subscores["acc_paper"] == pytest.approx(0.25)
    assert (res.subscores["citations"], res.subscores["valid_citations"]) == (2, 1)
    assert res.details["counts"] == {"supported": 1, "partially": 0, "unsupported": 1, "unknown": 0,
                                     "unreachable": 1, "refused": 1, "failed": 0}
    assert res.subscores["pairs"] == 4 and res.subscores["pairs_extracted"] == 5
    assert (res.judged, res.expected, res.status) == (4, 4, "ok")
    assert res.details["pages"] == {"ok": 2, "unreachable": 1, "refused": 1}
    assert res.details["extractor"] == "parser"
    # one dedup call (only URL a has 2 statements), one support call per readable page
    templates = sorted(t for t, _, _ in ctx.calls)
    assert templates == ["fact_dedup", "fact_support", "fact_support"]
    assert sorted(ctx.pages.requested) == sorted(PAGES)
    a = next(u for u in res.details["urls"] if u["url"] == "https://a.example/prices")
    assert a["statements"] == 2 and a["kept"] == 1 and a["supported"] == 1
    assert a["windows"] == ["whole page (52 chars, ~13 tokens)"]
    # the window used is stored with the verdict (its label)
    support_labels = [label for t, label, _ in ctx.calls if t == "fact_support"]
    assert all(" | whole page" in label for label in support_labels)


def test_failed_support_call_lowers_coverage_not_accuracy():
    fail = {("fact_support", "https://b.example/catch"): JudgeFailed("transient", "HTTP 503")}
    res = run(FakeContext(REPORT, FakePages(PAGES), scripted(fail)))
    # b's pair has no verdict: benchmark 1 / 1 = 1.0; paper 1 / (1 + 1 + 1) = 1/3
    assert res.score == 1.0
    assert res.subscores["acc_paper"] == pytest.approx(1 / 3)
    assert (res.judged, res.expected, res.status) == (3, 4, "partial")
    assert any("fact_support https://b.example/catch: transient" in e for e in res.errors)


def test_failed_dedup_keeps_every_statement():
    fail = {("fact_dedup", "https://a.example/prices"): JudgeFailed("undecodable")}
    res = run(FakeContext(REPORT, FakePages(PAGES), scripted(fail)))
    # both statements of a are judged (supported): benchmark 2 / 3; paper 2 / 5 = 0.4
    assert res.score == pytest.approx(2 / 3)
    assert res.subscores["acc_paper"] == pytest.approx(0.4)
    assert res.status == "partial" and any("all statements kept" in e for e in res.errors)


def test_missing_and_out_of_range_judgments_count_as_failed():
    odd = {("fact_support", "https://a.example/prices"):
           {"judgments": [{"statement": 7, "verdict": "supported"}]}}
    res = run(FakeContext(REPORT, FakePages(PAGES), scripted(odd)))
    assert res.details["counts"]["failed"] == 1 and res.details["counts"]["supported"] == 0
    assert any("no verdict for 1 statement" in e for e in res.errors)


def test_kept_numbers_ignores_invalid_and_never_keeps_nothing():
    assert kept_numbers([3, 1, 3, 9, 0], 4) == [1, 3]
    assert kept_numbers([], 3) == [1, 2, 3]
    assert kept_numbers([5], 3) == [1, 2, 3]


def test_statements_per_call_batches_and_long_page_window():
    paras = [" ".join(["filler"] * 60) + "." for _ in range(300)]
    paras[200] = "Mackerel prices rose 12% in 2023, the ministry said."
    page = "\n\n".join(paras)  # ~23,000 tokens
    report = ("Mackerel prices rose 12% in 2023 [1]. Exports to Norway doubled [1]. "
              "Canned fish sales fell [1].\n\n[1] https://a.example/prices")
    ctx = FakeContext(report, FakePages({"https://a.example/prices": page}),
                      scripted({("fact_dedup", "https://a.example/prices"): {"keep": [1, 2, 3]}}))
    res = run(ctx, page_budget_tokens=400, fact_statements_per_call=2, fact_page_text="window")
    supports = [v for t, _, v in ctx.calls if t == "fact_support"]
    assert len(supports) == 2  # 3 statements, 2 per call
    first = supports[0]
    assert estimate_tokens(first["page"]) <= 400 < estimate_tokens(page)
    assert "Mackerel prices rose 12% in 2023" in first["page"]
    assert first["window"].startswith("excerpts only: the ") and "[...] marks omitted text" in first["window"]
    assert res.subscores["pairs"] == 3


def test_llm_extraction_when_citations_cannot_be_parsed():
    # "... last year 1." is a citation point the parser does not read (number after the
    # text), so the report goes to the judge's extractor.
    report = ("Mackerel prices rose 12% last year 1.\n\nCatches fell sharply 1.\n\n"
              "## Sources\n1. https://a.example/prices\n")
    assert not parse_citations(report).parseable

    def script(template, variables, label):
        if template == "fact_extract":
            assert "https://a.example/prices" in variables["sources"]
            return {"pairs": [{"statement": "Mackerel prices rose 12% in 2023.", "url": "https://a.example/prices"},
                              {"statement": "Invented.", "url": "https://invented.example/x"}]}
        return scripted()(template, variables, label)

    res = run(FakeContext(report, FakePages(PAGES), script))
    assert res.details["extractor"] == "llm"
    assert res.details["llm_pairs_dropped"] == 1  # the URL is not in the report
    assert res.details["counts"]["supported"] == 1 and res.score == 1.0


def test_parser_only_mode_never_asks_for_extraction():
    report = "Mackerel prices rose 12% in 2023.\n\n## Sources\n- https://a.example/prices\n"
    ctx = FakeContext(report, FakePages(PAGES), scripted())
    res = run(ctx, citation_extractor="parser")
    assert ctx.calls == [] and res.score is None and res.status == "skipped" and res.expected == 0


def test_report_without_citations_is_skipped_as_the_benchmark_does():
    res = run(FakeContext("Plain prose with no sources at all.", FakePages({}), scripted()))
    assert res.score is None and res.status == "skipped" and res.expected == 0
    assert res.errors[0].startswith("no_citations")


def test_partial_support_counts_as_supported_and_unknown_is_excluded():
    report = ("Alpha rose 5% [1]. Beta fell 3% [2]. Gamma held [3]. Delta moved [4].\n\n"
              "References\n[1] https://a.example/1\n[2] https://b.example/2\n[3] https://c.example/3\n"
              "[4] https://d.example/4\n")
    pages = {u: "A page with some real text on it." for u in
             ("https://a.example/1", "https://b.example/2", "https://c.example/3", "https://d.example/4")}
    labels = {"https://a.example/1": "supported", "https://b.example/2": "partially",
              "https://c.example/3": "unsupported", "https://d.example/4": "unknown"}

    def script(template, variables, label):
        if template == "fact_support":
            return {"judgments": [{"statement": 1, "verdict": labels[variables["url"]]}]}
        return None

    res = run(FakeContext(report, FakePages(pages), script))
    # benchmark: judged = supported + partially + unsupported = 3, valid = 2 -> 2/3
    # paper: strictly supported 1 of 4 labelled -> 0.25
    assert res.score == pytest.approx(2 / 3)
    assert (res.subscores["citations"], res.subscores["valid_citations"]) == (3, 2)
    assert res.subscores["acc_paper"] == pytest.approx(0.25)
    assert (res.subscores["partially"], res.subscores["unknown"]) == (1, 1)
    assert [s["outcome"] for s in res.details["statements"]] == ["supported", "partially", "unsupported",
                                                                  "unknown"]


def test_scrape_failed_placeholder_is_unreadable_without_a_judge_call():
    report = "Alpha rose 5% [1]. Beta fell [2].\n\nReferences\n[1] https://a.example/1\n[2] https://b.example/2\n"
    pages = {"https://a.example/1": "Scrape failed: HTTP 403 Forbidden", "https://b.example/2": "Alpha Beta text."}
    ctx = FakeContext(report, FakePages(pages), lambda t, v, label: {"judgments": [
        {"statement": 1, "verdict": "supported"}]} if t == "fact_support" else None)
    res = run(ctx)
    assert res.details["counts"]["unreachable"] == 1 and res.details["counts"]["supported"] == 1
    assert [v["url"] for t, _, v in ctx.calls if t == "fact_support"] == ["https://b.example/2"]
    assert res.score == 1.0


def test_chunk_report_respects_budget_at_paragraphs():
    text = "\n\n".join(f"Paragraph {i} " + "word " * 40 for i in range(10))  # ~52 tokens each
    chunks = chunk_report(text, 120)
    assert len(chunks) == 5 and all(estimate_tokens(c) <= 120 for c in chunks)
    assert "\n\n".join(chunks) == text


def test_offline_rules_support_and_dedup():
    support = rules()["fact_support"]
    page = "In 2020 Japan landed 376,600 tons of chub mackerel, officials said."
    got = support({"page": page, "statements": "[1] Japan landed 376,600 tons in 2020\n"
                                                  "[2] Japan landed 300,000 tons in 2020\n"
                                                  "[3] Korea banned imports"}, {})
    # 1: all terms and numbers present; 2: the terms are there but the number differs; 3: no overlap
    assert [j["verdict"] for j in got["judgments"]] == ["supported", "partially", "unsupported"]
    dedup = rules()["fact_dedup"]({"statements": "[1] Prices rose 12% in 2023\n[2] prices rose 12% in 2023.\n"
                                                 "[3] Exports doubled"}, {})
    assert dedup == {"keep": [1, 3]}


def real_reports(*ids):
    return [drb_report(i) for i in ids]


def test_offline_judge_on_real_reports_with_pages_quoting_the_statements():
    # Each URL's page is built from the statements that cite it, so the offline judge
    # must find every (de-duplicated) pair supported: accuracy 1.0 under both conventions.
    for row in real_reports(1, 2, 3, 61, 62):
        parse = parse_citations(row["article"])
        pages: dict[str, str] = {}
        for p in parse.pairs:
            pages[p.url] = pages.get(p.url, "Header.") + "\n\n" + p.statement
        res = run(FakeContext(row["article"], FakePages(pages), prompt=row["prompt"]))
        assert res.score == 1.0 and res.subscores["acc_paper"] == 1.0, row["id"]
        assert res.subscores["pairs"] <= res.subscores["pairs_extracted"] == len(parse.pairs)
        assert res.status == "ok"


def test_no_page_source_makes_every_pair_unreachable():
    (row,) = real_reports(1)
    res = run(FakeContext(row["article"], None))
    assert res.score == 0.0 and res.subscores["acc_paper"] == 0.0 and res.status == "partial"
    assert res.details["counts"]["unreachable"] == res.expected > 0


def test_dry_run_with_placeholder_pages_plans_every_call():
    # Dry runs answer with the offline judge and placeholder pages: every URL is read and
    # judged, so calls = dedup calls (URLs with >= 2 statements) + one support call per
    # URL per 20 kept statements.
    (row,) = real_reports(61)
    ctx = FakeContext(row["article"], PlaceholderPages())
    res = run(ctx)
    by_url: dict[str, set[str]] = {}
    for p in parse_citations(row["article"]).pairs:
        by_url.setdefault(p.url, set()).add(p.statement)
    dedups = sum(1 for s in by_url.values() if len(s) >= 2)
    kept = {u["url"]: u["kept"] for u in res.details["urls"]}
    supports = sum(math.ceil(k / 20) for k in kept.values())
    assert [t for t, _, _ in ctx.calls].count("fact_dedup") == dedups
    assert [t for t, _, _ in ctx.calls].count("fact_support") == supports
    assert res.details["pages"]["ok"] == len(by_url) == len(ctx.pages.urls)


def _counts(**kw):
    base = {o: 0 for o in ("supported", "partially", "unsupported", "unknown", "unreachable", "refused", "failed")}
    base.update(kw)
    return {k: float(v) for k, v in base.items()}


def test_fact_suite_pools_like_the_benchmark_and_keeps_the_paper_figures():
    rows = [
        # report 1: 3 supported, 1 partial, 4 unsupported, 2 unknown
        ScoreRow(task_id="1", agent="x", method="fact", score=0.5,
                 subscores=_counts(supported=3, partially=1, unsupported=4, unknown=2)),
        # report 2: 1 supported, 1 unreachable
        {"task_id": "2", "agent": "x", "method": "fact", "score": 1.0, "status": "ok",
         "subscores": _counts(supported=1, unreachable=1)},
        # report 3 cites nothing; report 4 failed
        ScoreRow(task_id="3", agent="x", method="fact", score=None, status="skipped"),
        ScoreRow(task_id="4", agent="x", method="fact", score=None, status="failed"),
        ScoreRow(task_id="1", agent="x", method="race", score=0.1),
    ]
    suite = fact_suite(rows)
    bench = suite["benchmark"]
    # judged (unknown/unreadable excluded): 8 + 1 = 9 over 2 cited reports; valid 4 + 1 = 5
    assert bench["reports"] == 2
    assert bench["total_citations"] == pytest.approx(9 / 2)
    assert bench["total_valid_citations"] == pytest.approx(5 / 2)
    assert bench["valid_rate"] == pytest.approx(5 / 9)  # pooled, not (0.5 + 1.0) / 2
    paper = suite["paper"]
    # Acc_t strict: 3/10 and 1/2; the uncited report counts 0 over 3 reports
    assert paper["c_acc_paper"] == pytest.approx((0.3 + 0.5 + 0.0) / 3)
    assert paper["e_cit_paper"] == pytest.approx((3 + 1) / 3)
    assert suite["failed_reports"] == 1
    assert set(fact_suite_by_agent(rows)) == {"x"}


def test_suite_from_summary_means_matches_rows():
    from drscore.engine.methods.fact.tally import suite_from_means

    # two scored rows: citations 8 and 1, valid 4 and 1, acc_paper 0.3 and 0.5, supported 3 and 1;
    # one skipped row
    entry = {"n": 2, "skipped": 1, "subscores": {"citations": 4.5, "valid_citations": 2.5, "acc_paper": 0.4,
                                                 "supported": 2.0}}
    got = suite_from_means(entry)
    assert got["benchmark"] == {"reports": 2, "total_citations": 4.5, "total_valid_citations": 2.5,
                                "valid_rate": pytest.approx(5 / 9)}
    assert got["paper"]["c_acc_paper"] == pytest.approx(0.8 / 3)
    assert got["paper"]["e_cit_paper"] == pytest.approx(4 / 3)


# --------------------------------------------------------------------------- end to end

E2E_FILLER = ("Fisheries agencies publish landing statistics every spring, and market reports follow "
              "within weeks. Analysts compare the figures with earlier seasons and with neighbouring "
              "fleets before drawing conclusions about the stock.")


def _html(title: str, *paragraphs: str) -> bytes:
    body = "".join(f"<p>{p}</p>" for p in (*paragraphs, E2E_FILLER, E2E_FILLER))
    return (f"<!doctype html><html><head><title>{title}</title></head><body><article><h1>{title}</h1>"
            f"{body}</article></body></html>").encode()


E2E_PAGES = {
    "/p/prices": _html("Tokyo fish market", "Chub mackerel prices in Tokyo rose 12% in 2023 as landings fell."),
    "/p/catch": _html("Catch report", "Japan landed 300,000 tons of chub mackerel in 2020, officials said."),
}


async def test_end_to_end_offline_and_mock_judge_with_local_pages(tmp_path):
    from aiohttp import web

    from drscore.api import JudgeConfig, Run, RunConfig
    from drscore.judge.mock.server import MockConfig, MockServerProcess

    hits: dict[str, int] = {}

    async def page(request):
        hits[request.path] = hits.get(request.path, 0) + 1
        body = E2E_PAGES.get(request.path)
        if body is None:
            raise web.HTTPNotFound()
        return web.Response(body=body, content_type="text/html")

    app = web.Application()
    app.router.add_get("/{tail:.*}", page)
    runner, base = await serve(app)
    report = (
        "Chub mackerel prices in Tokyo rose 12% in 2023 [1]. Japan landed 376,600 tons of chub mackerel "
        "in 2020 [2]. The species spawns in the East China Sea [3]. Catch data are shared through the NPFC [4]."
        f"\n\nReferences\n[1] {base}/p/prices - Prices\n[2] {base}/p/catch - Catch\n[3] {base}/missing - Gone\n"
        "[4] http://169.254.169.254/latest/meta-data - Metadata\n")
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_bytes(orjson.dumps({"task_id": "m1", "prompt": "How have chub mackerel prices and catches "
                                    "changed in Japan?"}) + b"\n")
    reports = tmp_path / "reports.jsonl"
    reports.write_bytes(orjson.dumps({"task_id": "m1", "agent": "bot", "report": report}) + b"\n")

    async def score(judge: JudgeConfig, out: str) -> dict[str, ScoreRow]:
        cfg = RunConfig(methods=["fact", "factuality", "kae"], reports=[str(reports)], tasks=str(tasks),
                        out=str(tmp_path / out), judge=judge, allow_private_fetch=True)
        async with Run(cfg) as run:
            return {row.method: row async for row in run.rows()}

    cache = str(tmp_path / "cache")
    try:
        # Offline judge: deterministic verdicts, so exact numbers.
        rows = await score(JudgeConfig(cache_dir=cache), "offline")
        fact = rows["fact"]
        # prices supported, catch partially (its terms match but 376,600 is not 300,000), 404
        # unreachable, metadata address refused: benchmark 2/2 (partial counts, unreadable
        # excluded), paper 1/4
        assert fact.judge == "offline"
        assert fact.details["counts"] == {"supported": 1, "partially": 1, "unsupported": 0, "unknown": 0,
                                          "unreachable": 1, "refused": 1, "failed": 0}
        assert fact.score == pytest.approx(1.0) and fact.subscores["acc_paper"] == pytest.approx(0.25)
        assert {u["url"].rsplit("/", 1)[-1]: u["page"] for u in fact.details["urls"]} == {
            "prices": "ok", "catch": "ok", "missing": "http_4xx", "meta-data": "ssrf_refused"}
        # factuality: prices 1, catch 0 (terms match, figure differs); the 404 and the refused
        # address are judged on their failure text (the authors' way) and score -1:
        # (1 + 0 - 1 - 1) / 4
        assert rows["factuality"].score == pytest.approx(-0.25)
        assert rows["factuality"].subscores["strong_support_rate"] == pytest.approx(0.25)
        assert rows["factuality"].subscores["judged_unreadable"] == 2
        assert rows["kae"].details["pages"] == {"ok": 2, "unreachable": 1, "refused": 1}
        assert rows["kae"].score is not None
        # three methods, one fetch per page
        assert hits == {"/p/prices": 1, "/p/catch": 1, "/missing": 1}

        # Mock judge over HTTP: schema-valid random verdicts; pages come from the store.
        with MockServerProcess(MockConfig(seed=3)) as mock:
            judge = JudgeConfig(url=mock.url, model="mock", cache_dir=cache)
            rows = await score(judge, "mock")
            sent = mock.stats()["ok"]
            assert sent == sum(r.calls for r in rows.values()) > 0
            assert rows["fact"].details["pages"] == {"ok": 2, "unreachable": 1, "refused": 1}
            assert rows["fact"].judge == "mock"
            verdicts = [orjson.loads(x) for x in (tmp_path / "mock" / "verdicts.jsonl").read_bytes().splitlines()]
            support = [v for v in verdicts if v["template"] == "fact_support"]
            assert len(support) == 2 and all(" | whole page (" in v["label"] for v in support)
            # a warm re-run pays nothing and gives the same rows
            again = await score(judge, "mock2")
            assert mock.stats()["ok"] == sent
            assert {m: (r.score, r.subscores) for m, r in again.items()} == \
                {m: (r.score, r.subscores) for m, r in rows.items()}
        assert hits == {"/p/prices": 1, "/p/catch": 1, "/missing": 1}
    finally:
        await runner.cleanup()


def test_offline_extraction_rule():
    extract = rules()["fact_extract"]
    # markers resolved through the URL lines that travel with every chunk
    got = extract({"chunk": "1 of 2", "report": "Prices rose 12% in 2023 [1].",
                   "sources": "[1] https://a.example/prices - Prices"}, {})
    assert got == {"pairs": [{"statement": "Prices rose 12% in 2023.", "url": "https://a.example/prices"}]}
    # no markers: sentences naming a cited site's host
    got = extract({"chunk": "1 of 1", "report": "Figures from fao.org show a decline. Nothing else here.",
                   "sources": "- https://www.fao.org/fishery/stats"}, {})
    assert got == {"pairs": [{"statement": "Figures from fao.org show a decline.",
                              "url": "https://www.fao.org/fishery/stats"}]}


async def test_no_readable_page_is_scored_by_convention_but_flagged_partial():
    """Every cited page unreachable: nothing is judgeable, valid_rate is 0 by the
    benchmark's empty-denominator rule, and the row says why instead of looking healthy."""
    from drscore.engine.methods.fact.method import Fact

    class DeadPages:
        async def get(self, url):
            return PageResult(url=url, normalized_url=url, status="dns", detail="no such host")

    class Ctx:
        task = Task(task_id="t", prompt="q")
        report = Report(task_id="t", agent="a", report=(
            "Solar output rose 20% in 2023 [1]. Wind grew too [2].\n\n"
            "## References\n[1] https://a.example/x\n[2] https://b.example/y\n"))
        method, options, seed, pages = "fact", {}, 0, DeadPages()

        async def ask(self, *a, **k):
            raise AssertionError("nothing readable: the judge must not be asked")

        def rng(self, *salt):
            return random.Random(0)

        async def offload(self, fn, *args):
            return fn(*args)

    result = await Fact().score(Ctx())
    assert result.score == 0.0 and result.subscores["citations"] == 0
    assert result.subscores["unreachable"] == 2 and result.status == "partial"
    assert "none of the 2 pair(s) could be judged" in result.errors[-1]


# ---------------------------------------------------------------- issue 20: fidelity

ZH_REPORT = "鲭鱼价格在2023年上涨了12%[1]。日本2020年捕捞了37.66万吨[1]。\n\n参考文献\n[1] https://a.example/prices\n"
ZH_TASK = "调研日本鲭鱼市场的价格与捕捞量。"


def _han_share(text: str) -> float:
    han = sum(1 for ch in text if "\u4e00" <= ch <= "\u9fff")
    latin = len("".join(ch if ch.isascii() and ch.isalpha() else " " for ch in text).split())
    return han / (han + latin)


def _rendered(template: str, variables: dict) -> str:
    from drscore import prompts
    return "\n".join(content for _, content in prompts.load(template).render(variables))


def test_chinese_task_gets_chinese_instructions_at_every_fact_step():
    pages = {"https://a.example/prices": "2023年鲭鱼价格上涨12%。2020年日本捕捞37.66万吨。"}
    ctx = FakeContext(ZH_REPORT, FakePages(pages), None, prompt=ZH_TASK)
    res = run(ctx, citation_extractor="llm")  # the extraction step too
    templates = [t for t, _, _ in ctx.calls]
    assert set(templates) == {"fact_extract_zh", "fact_dedup_zh", "fact_support_zh"}
    for template, _, variables in ctx.calls:
        # the instructions themselves are Chinese: drop the report's own text and check
        rendered = _rendered(template, {k: "" for k in variables} | {"url": ""})
        assert _han_share(rendered) > 0.8, template
    assert res.details["prompt_language"] == "zh"
    assert res.details["templates"] == {"extract": "fact_extract_zh", "dedup": "fact_dedup_zh",
                                        "support": "fact_support_zh"}
    support = next(v for t, _, v in ctx.calls if t == "fact_support_zh")
    assert support["window"] == "网页全文"  # the note on what is shown is Chinese too


def test_english_task_and_forced_language_use_english_templates():
    pages = {"https://a.example/prices": "Mackerel prices rose 12% in 2023."}
    ctx = FakeContext(REPORT, FakePages(pages), scripted())
    run(ctx)
    assert {t for t, _, _ in ctx.calls} == {"fact_dedup", "fact_support"}
    ctx = FakeContext(ZH_REPORT, FakePages(pages), None, prompt=ZH_TASK)
    res = run(ctx, prompt_language="en")
    assert {t for t, _, _ in ctx.calls} == {"fact_dedup", "fact_support"}
    for template, _, variables in ctx.calls:
        assert _han_share(_rendered(template, {k: "" for k in variables})) == 0.0
    assert res.details["prompt_language"] == "en"


def test_dedup_rule_exact_by_default_paraphrase_as_option():
    report = ("Mackerel prices rose 12% in 2023 [1]. Prices climbed by twelve percent last year [1]. "
              "MACKEREL prices rose 12% in 2023! [1]\n\n[1] https://a.example/prices")
    pages = {"https://a.example/prices": "Mackerel prices rose 12% in 2023."}
    ctx = FakeContext(report, FakePages(pages), None)  # the offline judge's rules
    res = run(ctx)
    dedup = [(t, v) for t, _, v in ctx.calls if t.startswith("fact_dedup")]
    assert [t for t, _ in dedup] == ["fact_dedup"]
    assert "exactly the same thing" in _rendered("fact_dedup", dedup[0][1])
    # exact rule: statements 1 and 3 differ only in case and punctuation -> 2 kept
    assert res.details["urls"][0]["statements"] == 3 and res.details["urls"][0]["kept"] == 2
    assert res.details["dedup_rule"] == "exact"

    def paraphrase(template, variables, label):  # a judge merging all three as one fact
        return {"keep": [1]} if template == "fact_dedup_paraphrase" else scripted()(template, variables, label)

    ctx = FakeContext(report, FakePages(pages), paraphrase)
    res = run(ctx, fact_dedup="paraphrase")
    assert "other words" in _rendered("fact_dedup_paraphrase", {"url": "u", "statements": "[1] a"})
    assert [t for t, _, _ in ctx.calls if t.startswith("fact_dedup")] == ["fact_dedup_paraphrase"]
    assert res.details["urls"][0]["kept"] == 1 and res.details["dedup_rule"] == "paraphrase"
    with pytest.raises(ValueError, match="--fact-dedup"):
        Fact({"fact_dedup": "fuzzy"})


def _long_page(paragraphs: int) -> str:
    paras = [" ".join(["filler"] * 60) + "." for _ in range(paragraphs)]
    paras[paragraphs // 2] = "Mackerel prices rose 12% in 2023, the ministry said."
    return "\n\n".join(paras)


def test_whole_page_when_it_fits_the_judges_context():
    page = _long_page(300)  # ~23,000 tokens: far beyond the 6,000-token window
    report = "Mackerel prices rose 12% in 2023 [1].\n\n[1] https://a.example/prices"
    ctx = FakeContext(report, FakePages({"https://a.example/prices": page}), scripted())
    ctx.judge_model = "gpt-4.1"  # 1,047,576-token context in the window table
    res = run(ctx)
    support = next(v for t, _, v in ctx.calls if t == "fact_support")
    assert support["page"] == page
    assert support["page_text"].startswith("whole page; whole-page mode")
    assert "gpt-4.1 context 1,047,576" in support["page_text"]
    assert res.details["page_text"] == "whole"
    assert res.details["urls"][0]["page_text"] == [support["page_text"]]


def test_page_longer_than_an_unknown_judges_default_context_gets_its_relevant_passages():
    from drscore.engine.methods.cited_pages import CONTEXT_SHARE, DEFAULT_JUDGE_CONTEXT
    page = _long_page(600)  # ~46,000 tokens
    assert estimate_tokens(page) > DEFAULT_JUDGE_CONTEXT
    report = "Mackerel prices rose 12% in 2023 [1].\n\n[1] https://a.example/prices"
    ctx = FakeContext(report, FakePages({"https://a.example/prices": page}), scripted())
    ctx.judge_model = "my-local-model"
    run(ctx)
    support = next(v for t, _, v in ctx.calls if t == "fact_support")
    shown = estimate_tokens(support["page"])
    # at most the share of (32,000 - the template's 1,500 output tokens), far above 6,000
    assert 6000 < shown <= CONTEXT_SHARE * (DEFAULT_JUDGE_CONTEXT - 1500)
    assert "Mackerel prices rose 12% in 2023, the ministry said." in support["page"]
    assert support["page_text"].startswith("relevant passages (page longer than the budget); whole-page mode")
    assert "unknown model, default context 32,000" in support["page_text"]


def test_a_thinking_judges_allowance_comes_out_of_the_pages_room():
    from drscore import prompts
    from drscore.engine.runtime.calls.thinking import ThinkingPolicy
    page = _long_page(600)  # ~46,000 tokens, more than qwen3-32b's 40,960-token context
    report = "Mackerel prices rose 12% in 2023 [1].\n\n[1] https://a.example/prices"
    ctx = FakeContext(report, FakePages({"https://a.example/prices": page}), scripted())
    ctx.judge_model = "qwen3-32b"
    policy = ThinkingPolicy("qwen3-32b")  # the open family: 8,192 tokens to think
    ctx.output_cap = lambda template: policy.cap(prompts.load(template).max_tokens)
    assert ctx.output_cap("fact_support") == 1_500 + 8_192
    run(ctx)
    support = next(v for t, _, v in ctx.calls if t == "fact_support")
    # page + everything else sent fits the context: (40,960 - 9,692 - prompt) * 0.85 at most
    assert estimate_tokens(support["page"]) <= 0.85 * (40_960 - 9_692)
    assert "Mackerel prices rose 12% in 2023, the ministry said." in support["page"]


def test_window_mode_uses_the_page_budget_and_says_so():
    page = _long_page(300)
    report = "Mackerel prices rose 12% in 2023 [1].\n\n[1] https://a.example/prices"
    ctx = FakeContext(report, FakePages({"https://a.example/prices": page}), scripted())
    ctx.judge_model = "gpt-4.1"
    res = run(ctx, fact_page_text="window", page_budget_tokens=500)
    support = next(v for t, _, v in ctx.calls if t == "fact_support")
    assert estimate_tokens(support["page"]) <= 500
    assert support["page_text"] == ("relevant passages (page longer than the budget); relevant-window mode, "
                                    "500-token budget (--page-budget-tokens)")
    assert res.details["page_text"] == "window"
    with pytest.raises(ValueError, match="--fact-page-text"):
        Fact({"fact_page_text": "all"})


def test_bibliography_only_report_is_skipped_with_a_note_and_no_judge_call():
    report = ("Mackerel prices rose. Catches fell.\n\n## Annotated bibliography\n"
              "- Ministry (2023). Prices. https://a.example/prices - says prices rose.\n"
              "- Agency (2020). Catch. https://b.example/catch - says catches fell.\n")
    ctx = FakeContext(report, FakePages(PAGES), scripted())
    res = run(ctx)
    assert ctx.calls == [] and res.status == "skipped" and res.score is None
    assert res.errors[0].startswith("no_citations: bibliography only: the report lists 2 reference(s)")
    assert res.details["bibliography_only"] is True


def test_identifier_citations_are_judged_on_their_canonical_pages():
    report = ("Transformers scale with data (arXiv:2311.10252). "
              "[ENCODE](doi:10.1038/nature11152) mapped the genome.")
    pages = {"https://arxiv.org/abs/2311.10252": "Transformers scale with data.",
             "https://doi.org/10.1038/nature11152": "ENCODE mapped the genome."}
    ctx = FakeContext(report, FakePages(pages), None)
    res = run(ctx)
    assert res.details["extractor"] == "parser" and res.status == "ok"
    assert sorted(ctx.pages.requested) == sorted(pages)
    assert res.details["counts"]["supported"] == 2


def test_llm_extraction_keeps_identifier_urls_the_report_cites():
    report = "Transformers scale with data (arXiv:2311.10252)."

    def script(template, variables, label):
        if template == "fact_extract":
            return {"pairs": [
                {"statement": "Transformers scale with data.", "url": "https://arxiv.org/abs/2311.10252"},
                {"statement": "Transformers scale with data.", "url": "arXiv:2311.10252"},  # same, as written
                {"statement": "Invented.", "url": "https://arxiv.org/abs/9999.99999"}]}
        return {"judgments": [{"statement": 1, "verdict": "supported"}]}

    ctx = FakeContext(report, FakePages({"https://arxiv.org/abs/2311.10252": "Transformers scale."}), script)
    res = run(ctx, citation_extractor="llm")
    assert res.details["extractor"] == "llm" and res.details["llm_pairs_dropped"] == 1
    assert [u["url"] for u in res.details["urls"]] == ["https://arxiv.org/abs/2311.10252"]


def test_identifiers_point_at_their_canonical_url_or_as_written_like_the_benchmark():
    # The benchmark's extractor sometimes kept "arXiv:..." as the URL, and its scraper
    # fetched that string as is (it fails); --identifier-urls as-written does the same.
    report = ("Loss falls as a power law of compute (arXiv:2001.08361). Attention suffices "
              "(see https://arxiv.org/abs/1706.03762).\n")
    fetched: list[str] = []

    class Pages(FakePages):
        async def get(self, url):
            fetched.append(url)
            return await super().get(url)

    ctx = FakeContext(report, Pages({"https://arxiv.org/abs/2001.08361": "Loss falls as a power law.",
                                     "https://arxiv.org/abs/1706.03762": "Attention suffices."}), scripted())
    res = run(ctx)
    assert sorted(fetched) == ["https://arxiv.org/abs/1706.03762", "https://arxiv.org/abs/2001.08361"]
    assert res.details["identifier_urls"] == "canonical"
    fetched.clear()
    ctx = FakeContext(report, Pages({}), scripted())
    res = run(ctx, identifier_urls="as-written")
    # The URL the report writes stays a URL; the identifier is fetched as written.
    assert sorted(fetched) == ["arXiv:2001.08361", "https://arxiv.org/abs/1706.03762"]
    assert res.details["identifier_urls"] == "as-written"
    with pytest.raises(ValueError, match="--identifier-urls"):
        run(FakeContext(report, Pages({}), scripted()), identifier_urls="raw")
