"""``drscore citations``: pairs as JSONL without judging or fetching."""
from __future__ import annotations


import orjson

from drscore.cli import main
from support.data import DATA


def test_pairs_jsonl_and_bad_lines(tmp_path, capsys):
    reports = tmp_path / "reports.jsonl"
    reports.write_text("\n".join([
        orjson.dumps({"task_id": "t1", "agent": "bot", "report":
                      "Prices rose 12% [1]. Wind grew [2].\n\nReferences\n[1] https://a.example/p\n"}).decode(),
        "{not json",
        orjson.dumps({"task_id": "t2", "agent": "bot", "report": "See https://b.example/q for data."}).decode(),
        # a bibliography nobody cites: no pairs, and nothing for the judge's extractor either
        orjson.dumps({"task_id": "t3", "agent": "bot", "report": "Sources:\n- https://c.example/r"}).decode(),
        orjson.dumps({"task_id": "t4", "agent": "bot", "report": "Claim [7]. Other claim [8]."}).decode(),
    ]) + "\n")
    code = main(["citations", "--reports", str(reports)])
    out, err = capsys.readouterr()
    lines = [orjson.loads(x) for x in out.splitlines()]
    assert lines == [
        {"task_id": "t1", "agent": "bot", "statement": "Prices rose 12%.", "url": "https://a.example/p",
         "marker": "[1]", "kind": "numbered", "extractor": "parser"},
        {"task_id": "t2", "agent": "bot", "statement": "See for data.", "url": "https://b.example/q",
         "marker": "", "kind": "bare", "extractor": "parser"},
    ]
    assert code == 3  # a line was skipped
    assert f"{reports}:2: malformed JSON" in err
    assert f"{reports}:5: citations not parseable" in err and f"{reports}:4:" not in err


def test_summary_over_real_drb_reports_with_tasks(capsys):
    code = main(["citations", "--reports", str(DATA / "drb" / "reports.claude-3-7-sonnet.jsonl"),
                 "--tasks", str(DATA / "drb" / "tasks.jsonl"), "--summary"])
    out, err = capsys.readouterr()
    rows = [orjson.loads(x) for x in out.splitlines()]
    assert code == 0 and err == ""
    assert len(rows) == 21 and {r["agent"] for r in rows} == {"claude-3-7-sonnet"}  # the slice's 21 reports
    # 364 "[n] http..." reference lines in those articles (counted with grep)
    assert sum(r["references"] for r in rows) == 364 and all(r["parseable"] for r in rows)
    assert min(r["pairs"] for r in rows) == 3  # report 48 cites in 3 sentences
    assert not any(r["bibliography_only"] for r in rows) and min(r["citation_points"] for r in rows) >= 3
