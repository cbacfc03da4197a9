"""What the pages say the run paid comes from its ledger (every invocation), with the bound
of calls lost in flight: ``drscore view``'s state line data, the static viewer, the
report's overview and ``leaderboard.md`` — also for a run that never wrote its summary."""
from __future__ import annotations

import aiohttp
import msgspec

from drscore.engine.reporting.view_server import ViewConfig, ViewServer
from drscore.engine.reporting.viewer import render_viewer
from drscore.engine.runtime.calls.ledger import LEDGER_FILE, RunLedger
from drscore.engine.runtime.models import ScoreRow
from drscore.engine.runtime.rundir_read import read_run_dir


def _run(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    row = ScoreRow(task_id="1", agent="a", method="quality", score=0.5, cost_usd=0.375)
    (run / "scores.jsonl").write_bytes(msgspec.json.encode(row) + b"\n")
    first = RunLedger(run / LEDGER_FILE)
    call = first.sent("k1", "quality", 1.0)
    first.paid(call, input_tokens=10, cached_input_tokens=0, output_tokens=1, reasoning_tokens=0, cost_usd=0.25,
               cost_usd_uncached=0.25, judge_s=1.0, wait_s=0.0)
    first.sent("lost", "quality", 0.5)  # kill -9 with this call at the judge
    second = RunLedger(run / LEDGER_FILE)
    call = second.sent("k2", "quality", 1.0)
    second.paid(call, input_tokens=10, cached_input_tokens=0, output_tokens=1, reasoning_tokens=0, cost_usd=0.125,
                cost_usd_uncached=0.125, judge_s=1.0, wait_s=0.0)
    second.close("finished")
    return run


SAID = ("cost: last invocation $0.1250; run total $0.3750 for 2 paid calls (2 invocations); up to $0.5000 more "
        "may have been billed for 1 call interrupted in flight")


async def test_drscore_view_says_what_the_ledger_says(tmp_path):
    run = _run(tmp_path)
    async with ViewServer(ViewConfig(run_dir=str(run), port=0)) as server, aiohttp.ClientSession() as s:
        async with s.get(server.url + "api/meta") as resp:
            meta = await resp.json()
    assert meta["money"] == SAID and meta["rows"] == 1


def test_the_static_viewer_says_it_too(tmp_path):
    run = _run(tmp_path)
    page = render_viewer(read_run_dir(run), [])
    assert f'<p class="muted" id="money">{SAID}</p>' in page


def test_the_report_and_leaderboard_md_say_it_for_a_run_that_never_finished(tmp_path):
    from drscore.engine.reporting.decisions import overview_facts
    from drscore.engine.reporting.tables import leaderboard, leaderboard_markdown

    run = read_run_dir(_run(tmp_path))  # no summary.json: the ledger alone knows the money
    facts = dict(overview_facts(run))
    assert facts["total cost"].startswith("$0.3750 paid")
    assert facts["paid per invocation"] == "last invocation $0.1250; run total $0.3750 for 2 paid calls (2 invocations)"
    assert facts["lost in flight"] == "up to $0.5000 more may have been billed for 1 call interrupted in flight"
    md = leaderboard_markdown(run, leaderboard(run.scores), confidence=0.95, resamples=100, seed=0)
    assert f"Cost: {SAID.removeprefix('cost: ')}." in md
