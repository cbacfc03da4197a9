"""`drscore report` on runs past its page limits (issue 17): the viewer becomes a pointer
to `drscore view`, per-task charts are capped and say so, the viewer says what it holds."""
from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from drscore.cli import main
from drscore.engine.reporting import html as report_html
from drscore.engine.reporting import viewer
from drscore.engine.runtime.models import ScoreRow


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    enc = msgspec.json.Encoder()
    rows = [ScoreRow(task_id=str(t), agent="a", method="quality", score=t / 4, cost_usd=t / 100,
                     details={"statements": ["long"] * 50, "supported": 2, "unsupported": 1})
            for t in (1, 2, 3)]
    (tmp_path / "scores.jsonl").write_bytes(b"".join(enc.encode(r) + b"\n" for r in rows))
    return tmp_path


def test_small_run_gets_the_full_viewer_saying_how_many_rows(run_dir: Path) -> None:
    assert main(["report", str(run_dir)]) == 0
    page = (run_dir / "viewer.html").read_text()
    assert "This page holds 3 rows." in page and f"drscore view {run_dir}" not in page
    report = (run_dir / "report.html").read_text()
    assert "supported" in report  # citation counts survive the slimmed rows


def test_past_the_limits_a_pointer_and_capped_charts(run_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(viewer, "MAX_VIEWER_ROWS", 2)
    monkeypatch.setattr(report_html, "MAX_TASKS_DRAWN", 2)
    assert main(["report", str(run_dir)]) == 0
    pointer = (run_dir / "viewer.html").read_text()
    assert "This run has 3 score rows" in pointer and f"drscore view {run_dir}" in pointer
    assert "<script" not in pointer and "default-src 'none'" in pointer
    report = (run_dir / "report.html").read_text()
    assert "The first 2 of 3 tasks in task order" in report
    # per task: the 2 most expensive of 3 (tasks 3 and 2 cost 0.03 and 0.02)
    assert "The 2 most expensive of 3 tasks" in report
