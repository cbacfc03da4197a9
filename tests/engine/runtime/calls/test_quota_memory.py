"""The quota an endpoint announced is kept in the cache; the next run against it paces from
its first request, the preflight overlapped as with a told quota, instead of sending one
call and waiting for that answer's headers."""
from __future__ import annotations

import shutil
import sqlite3

import orjson

from drscore.judge.mock.server import MockConfig, MockServerProcess
from support.quality_run import quality_scores

LATENCY = 3.0  # every answer takes this long: what the first run's other calls wait for


async def test_the_next_run_paces_from_its_first_request_at_the_quota_announced_before(tmp_path):
    # An endpoint that refuses streamed bodies (so the preflight's headers come only with its answer)
    with MockServerProcess(MockConfig(profile="openai", rpm=600, latency=LATENCY, streams=False)) as mock:
        await quality_scores(mock.url, tmp_path / "first", cache=tmp_path / "cache")
        first = mock.stats()
        with sqlite3.connect(tmp_path / "cache" / "judge.sqlite") as db:
            rows = db.execute("SELECT endpoint, quota FROM quotas").fetchall()
        # announced, not learned from 429s (KnownQuota.learned)
        stored = [(e, orjson.loads(q)) for e, q in rows]
        assert stored == [(f"{mock.url} gpt-4.1", {"rpm": 600.0, "tpm": 0.0, "learned": "", "guessed": False})]
        # the same cache file without its answers (the second run pays for every call again)
        (tmp_path / "again").mkdir()
        shutil.copy(tmp_path / "cache" / "judge.sqlite", tmp_path / "again" / "judge.sqlite")
        with sqlite3.connect(tmp_path / "again" / "judge.sqlite") as db:
            db.execute("DELETE FROM responses")
        mock.reset()
        await quality_scores(mock.url, tmp_path / "second", cache=tmp_path / "again")
        second = mock.stats()
    assert first["ok"] == second["ok"] == 6 and first["rate_limited"] == second["rate_limited"] == 0
    # first contact: the other five calls left only once the first answer (LATENCY) was in
    assert first["last_request_at"] - first["first_request_at"] >= LATENCY
    # the quota remembered: all six left before any answer came back
    assert second["last_request_at"] - second["first_request_at"] < LATENCY


async def test_a_streamed_preflight_announces_the_quota_at_admission_on_first_contact(tmp_path):
    # Nothing remembered, nothing told: the preflight's headers arrive when the server admits
    # it, so the other calls leave before its answer, as with a remembered quota.
    with MockServerProcess(MockConfig(profile="openai", rpm=600, latency=LATENCY)) as mock:
        await quality_scores(mock.url, tmp_path / "first", cache=tmp_path / "cache")
        first = mock.stats()
    assert first["ok"] == 6 and first["rate_limited"] == 0 and first["bad_requests"] == 0
    assert first["max_in_flight"] == 6  # all six at the server at once: none waited for an answer
