"""Agent names and task ids are data in every output of ``drscore run``, ``report`` and
``export``: TeX is drawn literally (and bad TeX does not crash), HTML in Markdown is
escaped, CSV cells cannot start a formula, terminal escapes are shown, not obeyed."""
from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import pytest

from drscore.cli import main

BAD_TEX = "gpt $\\frac{$ x"
GOOD_TEX = "plan $20 vs $200"
HTML = '<img src=x onerror="fetch(1)">'
FORMULA = '=HYPERLINK("http://evil.example/")'
AT = "@SUM(A1)"
TERM = "evil\x1b]0;pwned\x07\x1b[31mred"
AGENTS = [BAD_TEX, GOOD_TEX, HTML, FORMULA, AT, TERM]
TASKS = ["t1", "t$2"]
TEXT = "# Quotas\n\nA quota limits requests per minute. It protects a service.\n\nWhen it is spent, callers wait."


@pytest.fixture()
def run_dir(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[Path, str]:
    tasks, reports = tmp_path / "tasks.jsonl", tmp_path / "reports.jsonl"
    tasks.write_text("".join(json.dumps({"task_id": t, "prompt": "Explain quotas."}) + "\n" for t in TASKS))
    reports.write_text("".join(json.dumps({"task_id": t, "agent": a, "report": TEXT}) + "\n"
                               for a in AGENTS for t in TASKS))
    out = tmp_path / "run"
    assert main(["run", "--methods", "quality", "--tasks", str(tasks), "--reports", str(reports),
                 "--out", str(out)]) == 0
    captured = capsys.readouterr()
    return out, captured.out + captured.err


def test_run_terminal_shows_escapes_not_commands(run_dir):
    _, terminal = run_dir
    assert "\x1b" not in terminal and "\x07" not in terminal
    assert "evil\\x1b]0;pwned\\x07" in terminal  # the name is still recognisable


def test_report_writes_every_file_and_draws_tex_literally(run_dir, capsys):
    out, _ = run_dir
    assert main(["report", str(out)]) == 0
    for name in ("leaderboard.md", "leaderboard.csv", "report.html", "viewer.html"):
        assert (out / name).is_file(), name
    page = (out / "report.html").read_text(encoding="utf-8")
    svgs = "".join(re.findall(r"<svg.*?</svg>", page, re.S))
    # The chart keeps the label as one literal <text> run: mathtext would split it into glyphs
    assert ">plan $20 vs $200<" in svgs and ">gpt $\\frac{$ x<" in svgs
    assert "evil\\x1b]0;pwned" in svgs  # a control character has no glyph: its escape is drawn
    # report.html and viewer.html escape the HTML name
    viewer = (out / "viewer.html").read_text(encoding="utf-8")
    assert "<img" not in page and "&lt;img src=x" in page
    assert "<img" not in viewer and "\\u003cimg src=x" in viewer  # inside its JSON data block
    assert "\x1b" not in capsys.readouterr().err


def test_leaderboard_markdown_carries_no_raw_html(run_dir):
    out, _ = run_dir
    assert main(["report", str(out)]) == 0
    md = (out / "leaderboard.md").read_text(encoding="utf-8")
    assert "<img" not in md
    assert "| &lt;img src=x onerror=&quot;fetch(1)&quot;&gt; |" in md


def test_every_sink_of_leaderboard_markdown_escapes_names(tmp_path: Path):
    # The hostile names, scored on different tasks (one agent on one task only): the
    # leaderboard then adds the "scored on different tasks" note, which names every agent,
    # beside the table cells, the subscores table and the unranked lines.
    tasks, reports = tmp_path / "tasks.jsonl", tmp_path / "reports.jsonl"
    tasks.write_text("".join(json.dumps({"task_id": t, "prompt": "Explain quotas."}) + "\n" for t in TASKS))
    reports.write_text("".join(json.dumps({"task_id": t, "agent": a, "report": TEXT}) + "\n"
                               for a in AGENTS for t in TASKS if a != HTML or t == TASKS[0]))
    out = tmp_path / "run"
    assert main(["run", "--methods", "quality", "--tasks", str(tasks), "--reports", str(reports),
                 "--out", str(out)]) == 0
    assert main(["report", str(out)]) == 0
    md = (out / "leaderboard.md").read_text(encoding="utf-8")
    note = next(line for line in md.splitlines() if "scored on different tasks" in line)
    assert "&lt;img src=x onerror=&quot;fetch(1)&quot;&gt; 1" in note
    assert "<img" not in md and "\x1b" not in md
    # every line naming the agent (table row, subscores row, note) carries it escaped
    named = [line for line in md.splitlines() if "img src=x" in line]
    assert len(named) >= 3 and all("&lt;img src=x" in line for line in named)


def _cells(path: Path, column: str) -> list[str]:
    with open(path, newline="", encoding="utf-8") as f:
        return [r[column] for r in csv.DictReader(f)]


def test_csv_cells_cannot_start_a_formula(run_dir, tmp_path):
    out, _ = run_dir
    assert main(["report", str(out)]) == 0
    assert main(["export", str(out), "--format", "csv", "--out", str(tmp_path / "rows.csv")]) == 0
    for path in (out / "leaderboard.csv", tmp_path / "rows.csv"):
        agents = _cells(path, "agent")
        assert "'" + FORMULA in agents and "'" + AT in agents, path
        assert not [a for a in agents if a[:1] in ("=", "+", "-", "@", "\t", "\r")], path
        assert GOOD_TEX in agents  # other names are unchanged
    scores = _cells(tmp_path / "rows.csv", "score")
    assert scores and all(s and not s.startswith("'") for s in scores)  # numbers are not prefixed


def test_compare_shows_escapes_not_commands(run_dir, capsys):
    out, _ = run_dir
    main(["compare", str(out), str(out)])
    shown = capsys.readouterr()
    assert "\x1b" not in shown.out + shown.err and "evil\\x1b]0;pwned" in shown.out
