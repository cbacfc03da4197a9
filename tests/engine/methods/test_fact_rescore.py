"""``drscore fact rescore``: the benchmark's utils/stat.py arithmetic on a hand-made
validated.jsonl, through the same aggregation live FACT runs use."""
from __future__ import annotations

import asyncio

import orjson
import pytest

from drscore.cli import main
from drscore.engine.methods.fact.rescore import rescore_validated


def _url(results, error=None, facts=None):
    return {"facts": facts or [f"f{i}" for i in range(len(results))], "url_content": "page",
            "validate_res": [{"idx": i, "result": r} for i, r in enumerate(results)], "validate_error": error}


LINES = [
    # report 1: 2 URLs; u1 supported, unsupported, unknown; u2 supported, supported
    {"id": 1, "prompt": "p", "article": "a", "citations": [{"fact": "x", "url": "u1"}],
     "citations_deduped": {"u1": _url(["supported", "unsupported", "unknown"]),
                           "u2": _url(["supported", "supported"])}},
    # report 2: cites nothing -> skipped entirely by stat.py
    {"id": 2, "prompt": "p", "article": "a", "citations": [], "citations_deduped": {}},
    # report 3: u3 errored (skipped), u4 unsupported, unknown, unknown
    {"id": 3, "prompt": "p", "article": "a", "citations": [{"fact": "y", "url": "u3"}],
     "citations_deduped": {"u3": _url([], error="no reference", facts=["f"]),
                           "u4": _url(["unsupported", "unknown", "unknown"])}},
    # report 4: everything unknown -> still counts in total_num with 0 citations
    {"id": 4, "prompt": "p", "article": "a", "citations": [{"fact": "z", "url": "u5"}],
     "citations_deduped": {"u5": _url(["unknown"])}},
]


@pytest.fixture
def validated(tmp_path):
    path = tmp_path / "validated.jsonl"
    path.write_bytes(b"\n".join(orjson.dumps(line) for line in LINES) + b"\n")
    return path


def test_reproduces_stat_py_arithmetic(validated):
    # stat.py: total_num = reports with citations = 3 (ids 1, 3, 4)
    # total_citations (non-unknown results, errored URLs skipped) = 4 (id 1) + 1 (id 3) + 0 = 5
    # total_valid_citations = 3 (id 1)
    # printed: 5/3, 3/3, valid_rate 3/5
    res = rescore_validated(validated)
    b = res.figures["benchmark"]
    assert b["reports"] == 3
    assert b["total_citations"] == pytest.approx(5 / 3)
    assert b["total_valid_citations"] == pytest.approx(1.0)
    assert b["valid_rate"] == pytest.approx(0.6)
    # paper, over all 4 reports: Acc_t = supported / every labelled pair
    # id1 3/5, id2 0 (no pair), id3 0/3, id4 0/1 -> C.Acc = 0.6 / 4; E.Cit = 3 / 4
    assert res.figures["paper"]["c_acc_paper"] == pytest.approx(0.15)
    assert res.figures["paper"]["e_cit_paper"] == pytest.approx(0.75)
    assert (res.lines, res.reports_with_citations, res.urls, res.urls_errored) == (4, 3, 5, 1)


def test_cli_json_has_the_benchmark_names(validated, capsys):
    assert main(["fact", "rescore", str(validated), "--json"]) == 0
    out = orjson.loads(capsys.readouterr().out)
    assert set(out["benchmark"]) >= {"total_citations", "total_valid_citations", "valid_rate"}
    assert out["benchmark"]["valid_rate"] == pytest.approx(0.6)
    assert main(["fact", "rescore", str(validated)]) == 0
    text = capsys.readouterr().out
    assert "valid_rate 0.6000" in text and "total_citations 1.6667" in text


def test_bad_line_is_named_and_the_rest_still_scored(validated, capsys):
    with open(validated, "ab") as f:
        f.write(b'{"id": 5, "citations_deduped": [1, 2]}\n')
    assert main(["fact", "rescore", str(validated), "--json"]) == 3
    captured = capsys.readouterr()
    assert f"{validated}:5:" in captured.err
    assert orjson.loads(captured.out)["benchmark"]["valid_rate"] == pytest.approx(0.6)


def test_missing_file_is_a_clear_error(tmp_path, capsys):
    assert main(["fact", "rescore", str(tmp_path / "nope.jsonl")]) == 1
    assert "validated file not found" in capsys.readouterr().err


def test_scraped_jsonl_import_feeds_a_live_fact_run_and_its_suite_figures(tmp_path, capsys):
    from drscore.api import JudgeConfig, Run, RunConfig

    scraped = tmp_path / "scraped.jsonl"
    scraped.write_bytes(orjson.dumps({"id": 1, "prompt": "p", "citations_deduped": {
        "https://a.example/prices": {"facts": ["x"], "url_content": "Prices\n\n\n\nMackerel prices rose 12% in 2023."},
        "https://b.example/gone": {"facts": ["y"], "url_content": "scrape failed: HTTP 403"},
    }}) + b"\n")
    cache = tmp_path / "cache"
    assert main(["pages", "import", str(scraped), "--cache", str(cache)]) == 0
    assert "imported 2 pages (1 with text)" in capsys.readouterr().out
    report = ("Mackerel prices rose 12% in 2023 [1]. Exports to Korea doubled [2].\n\nReferences\n"
              "[1] https://a.example/prices\n[2] https://b.example/gone\n")
    reports = tmp_path / "r.jsonl"
    reports.write_bytes(orjson.dumps({"task_id": "t1", "agent": "bot", "prompt": "Fish prices?",
                                      "report": report}) + b"\n"
                        + orjson.dumps({"task_id": "t2", "agent": "bot", "prompt": "Nothing?",
                                        "report": "No sources here."}) + b"\n")
    cfg = RunConfig(methods=["fact"], reports=[str(reports)], judge=JudgeConfig(cache_dir=str(cache)),
                    offline_pages=True)

    async def score():
        async with Run(cfg) as run:
            return {r.task_id: r async for r in run.rows()}, run.summary

    rows, summary = asyncio.run(score())
    assert rows["t1"].details["counts"]["supported"] == 1 and rows["t1"].details["counts"]["unreachable"] == 1
    assert rows["t2"].status == "skipped"
    entry = next(e for e in summary["per_agent_method"] if e["method"] == "fact")
    # one cited report: 1 judged citation, 1 valid; the uncited report counts only for the paper
    assert entry["suite"]["benchmark"] == {"reports": 1, "total_citations": 1.0, "total_valid_citations": 1.0,
                                           "valid_rate": 1.0}
    assert entry["suite"]["paper"]["c_acc_paper"] == pytest.approx(0.5 / 2)


def test_scraped_import_with_a_bad_line_names_it_and_writes_nothing(tmp_path, capsys):
    scraped = tmp_path / "scraped.jsonl"
    scraped.write_bytes(orjson.dumps({"id": 1, "citations_deduped": {"https://a.example/x": {"url_content": "text"}}})
                        + b"\n" + b'{"id": 2, "citations_deduped": {"https://b.example/y": {"url_content": 5}}}\n')
    cache = tmp_path / "cache"
    assert main(["pages", "import", str(scraped), "--cache", str(cache)]) == 1  # an error, not usage
    assert f"{scraped}:2:" in capsys.readouterr().err
    assert main(["pages", "stats", "--cache", str(cache)]) == 0
    assert orjson.loads(capsys.readouterr().out)["pages"] == 0
