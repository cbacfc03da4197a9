"""The view index is right or rebuilt: a file that is not SQLite, a table missing, rows
without bodies, calls lost, a body that is not JSON, each is found and the index built
again from the run's files, with the same rows and calls as a fresh one. Offsets and
limits out of SQLite's range are errors naming the field. Template variables are found
in a rendered prompt where they landed."""
from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import msgspec
import pytest

from drscore import prompts
from drscore.engine.reporting.view_index import (
    MAX_INT, PromptLookup, RowQuery, ViewIndex, mark_variables, prompt_messages, variable_spans,
)
from drscore.engine.runtime.models import ScoreRow, VerdictRecord

ENC = msgspec.json.Encoder()


def _run(tmp: Path) -> Path:
    run = tmp / "run"
    run.mkdir()
    rows = [ScoreRow(task_id=str(t), agent=a, method="m", score=t + (0.5 if a == "b" else 0.0))
            for t in range(1, 6) for a in ("a", "b")]
    calls = [VerdictRecord(task_id=r.task_id, agent=r.agent, method="m", template="quality", key=f"k{i}", cached=False,
                           status="ok", verdict={"overall": i}) for i, r in enumerate(rows)]
    (run / "scores.jsonl").write_bytes(b"".join(ENC.encode(r) + b"\n" for r in rows))
    (run / "verdicts.jsonl").write_bytes(b"".join(ENC.encode(c) + b"\n" for c in calls))
    return run


def _everything(index: ViewIndex) -> list[Any]:
    page = index.page(RowQuery(limit=100))["rows"]
    return [(r["task"], r["agent"], r["score"], [c["key"] for c in index.row(r["id"])["calls"]]) for r in page]


def _fresh(run: Path) -> list[Any]:
    index = ViewIndex(run)
    index.refresh()
    try:
        return _everything(index)
    finally:
        index.close()


def _damage(path: Path, sql: str) -> None:
    db = sqlite3.connect(path)
    db.executescript(sql)
    db.commit()
    db.close()


@pytest.mark.parametrize("damage", [
    "DROP TABLE calls",                                   # a table missing
    "DROP TABLE bodies",
    "DELETE FROM bodies WHERE id = 3",                    # a row without its body
    "DELETE FROM calls WHERE rowid % 2 = 0",              # calls lost
    "ALTER TABLE rows RENAME TO old_rows",                # a table of another layout
])
def test_a_damaged_index_is_found_when_opened_and_rebuilt(tmp_path: Path, damage: str) -> None:
    run = _run(tmp_path)
    want = _fresh(run)
    assert len(want) == 10 and all(len(calls) == 1 for *_, calls in want)
    _damage(run / "view.sqlite", damage)
    index = ViewIndex(run)
    assert index.damage is not None and "rebuilt" in index.damage and index.rebuilds == 1
    index.refresh()
    assert _everything(index) == want
    index.close()


def test_a_body_that_is_not_json_is_found_when_read_and_the_index_rebuilt(tmp_path: Path) -> None:
    run = _run(tmp_path)
    want = _fresh(run)
    _damage(run / "view.sqlite", "UPDATE bodies SET body = X'00ff7b' WHERE id = 4")
    index = ViewIndex(run)
    assert index.damage is None  # nothing shows until the row is read...
    row = index.row(4)
    assert index.rebuilds == 1 and "not JSON" in (index.damage or "")  # ...then it is rebuilt, and read again
    assert row is not None and (row["row"]["task_id"], row["row"]["agent"]) == (want[3][0], want[3][1])
    assert _everything(index) == want
    index.close()


def test_a_file_that_is_not_sqlite_is_replaced(tmp_path: Path) -> None:
    run = _run(tmp_path)
    want = _fresh(run)
    (run / "view.sqlite").write_bytes(b"this is not a database at all" * 10)
    index = ViewIndex(run)
    assert "not a SQLite database" in (index.damage or "")
    index.refresh()
    assert _everything(index) == want
    index.close()


def test_queries_out_of_range_are_errors_naming_the_field(tmp_path: Path) -> None:
    index = ViewIndex(_run(tmp_path))
    index.refresh()
    for query, field in ((RowQuery(offset=MAX_INT + 1), "offset"), (RowQuery(offset=-1), "offset"),
                         (RowQuery(limit=0), "limit"), (RowQuery(limit=10**6), "limit"), (RowQuery(sort="body"), "sort")):
        with pytest.raises(ValueError, match=field):
            index.page(query)
    assert index.page(RowQuery(offset=MAX_INT))["rows"] == []  # the largest offset SQLite holds: no rows, no error
    assert index.row(MAX_INT + 1) is None and index.row(0) is None and index.row(-5) is None
    index.close()


def test_the_pair_and_task_queries(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    # b - a per task: 1 -> +0.1, 2 -> -0.4, 3 -> +0.25, 4 -> only a scored
    scores = {("1", "a"): 0.5, ("1", "b"): 0.6, ("2", "a"): 0.9, ("2", "b"): 0.5, ("3", "a"): 0.0, ("3", "b"): 0.25,
              ("4", "a"): 0.3, ("4", "b"): None}
    (run / "scores.jsonl").write_bytes(b"".join(
        ENC.encode(ScoreRow(task_id=t, agent=a, method="m", score=s, status="ok" if s is not None else "failed"))
        + b"\n" for (t, a), s in scores.items()))
    index = ViewIndex(run)
    index.refresh()
    pair = index.pair_tasks("m", "b", "a")
    assert pair["n"] == 3
    assert [(x["task"], round(x["delta"], 6)) for x in pair["tasks"]] == [("2", -0.4), ("3", 0.25), ("1", 0.1)]
    assert index.pair_tasks("m", "b", "a", limit=1)["tasks"][0]["task"] == "2"
    assert [r["row"]["agent"] for r in index.task_rows("4")] == ["a", "b"]
    charts = index.scores("m", bins=2)
    assert charts["tasks"]["2"] == {"a": 0.9, "b": 0.5} and list(charts["tasks"]) == ["1", "2", "3", "4"]
    # a: 0.5 0.9 0.0 0.3, b: 0.6 0.5 0.25 over [0, 0.9] in two bins, the top edge in the last
    assert charts["range"] == [0.0, 0.9] and charts["counts"] == {"a": [2, 2], "b": [1, 2]}
    assert index.scores("m", max_tasks=2)["tasks_total"] == 4 and list(index.scores("m", max_tasks=2)["tasks"]) == ["1", "2"]
    assert [r.task_id for r in index.score_rows()] == ["1", "1", "2", "2", "3", "3", "4", "4"]
    index.close()


def test_variables_are_found_where_the_template_put_them() -> None:
    tpl = prompts.load("fact_support")
    values = {"url": "https://a.example/x?y=1", "page": "Prices rose 12% in 2023.\n</page> a page quoting its tag",
              "window": "the whole text", "statements": "[1] Prices rose 12%.\n[2] ${not a variable} $5"}
    (_, system), (_, user) = tpl.render(values)
    spans = variable_spans(dict(tpl.compiled)["user"].template, user)
    assert {name: user[s:e] for name, s, e in spans} == values
    assert variable_spans(dict(tpl.compiled)["user"].template, user + " edited") == []  # not what it rendered
    messages = prompt_messages([["system", system], ["user", user]])
    mark_variables(messages, "fact_support", tpl.hash)
    assert messages[0]["marks"] == [] and len(messages[1]["marks"]) == 4
    other = prompt_messages([["system", system], ["user", user]])
    mark_variables(other, "fact_support", "another-hash")  # an override or another version: nothing marked
    assert all("marks" not in m for m in other)


def test_prompts_are_read_from_a_path_never_a_uri(tmp_path: Path) -> None:
    # a directory whose name would be SQLite URI parameters if pasted into a file: URI
    weird = tmp_path / "cache?mode=rwc&vfs=x#frag%20"
    weird.mkdir()
    db = sqlite3.connect(weird / "judge.sqlite")
    db.execute("CREATE TABLE responses (key TEXT PRIMARY KEY, components BLOB, response BLOB)")
    db.execute("INSERT INTO responses VALUES ('k1', ?, ?)",
               (b'{"messages": [["user", "hello"]], "model": "m", "base_url": "https://secret"}', b"answer"))
    db.commit()
    db.close()
    before = sorted(p.name for p in tmp_path.rglob("*"))
    lookup = PromptLookup(weird / "judge.sqlite")
    got = lookup.get("k1")
    lookup.close()
    assert got == {"messages": [{"role": "user", "content": "hello"}], "model": "m", "answer": "answer"}
    assert sorted(p.name for p in tmp_path.rglob("*")) == before  # read-only: nothing created anywhere
    missing = PromptLookup(tmp_path / "nothing?mode=rwc" / "judge.sqlite")
    assert missing.get("k1") is None and missing.opened == [] and not (tmp_path / "nothing").exists()
    missing.close()
