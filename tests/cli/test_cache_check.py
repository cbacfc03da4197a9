"""``drscore cache check [--repair]`` on files with damaged rows: the damage is named,
and a repair keeps every readable row (judge answers are money already spent)."""
from __future__ import annotations

import sqlite3
from pathlib import Path

from drscore.commands.cache import check
from drscore.engine.runtime.calls.cache import JudgeCache
from drscore.fetch.content import content_hash
from drscore.fetch.store import PageRecord, PageStore

COMPONENTS = {"template": "t", "model": "m"}


async def _fill(cache_dir: Path) -> None:
    cache = await JudgeCache.open(cache_dir / "judge.sqlite")
    for i in range(5):
        await cache.put(f"k{i}", f'{{"answer": {i}}}'.encode(), COMPONENTS)
    await cache.close()
    async with PageStore(cache_dir / "pages.sqlite") as store:
        for i in range(3):
            text = f"Page {i} text."
            store.put(PageRecord(url=f"https://a.com/{i}", status="ok", http_status=200, final_url=None,
                                 fetched_at=1.0, content_hash=content_hash(text), detail=""), text)


async def test_check_names_damaged_rows_and_repair_keeps_the_rest(tmp_path: Path, capsys) -> None:
    await _fill(tmp_path)
    assert check(tmp_path) == 0
    assert capsys.readouterr().out.count(": ok") == 2
    with sqlite3.connect(tmp_path / "judge.sqlite") as db:
        db.execute("UPDATE responses SET response = x'ff00' WHERE key = 'k1'")
    with sqlite3.connect(tmp_path / "pages.sqlite") as db:
        db.execute("UPDATE pages SET status = CAST(x'ff' AS TEXT) WHERE url = 'https://a.com/2'")
    assert check(tmp_path) == 1
    out = capsys.readouterr().out
    assert "judge.sqlite: DAMAGED: 1 damaged row(s) in table responses" in out
    assert "pages.sqlite: DAMAGED: 1 damaged row(s) in table pages" in out

    assert check(tmp_path, repair=True) == 0
    assert "rebuilt with 4 readable row(s)" in capsys.readouterr().out  # judge: 5 - 1
    assert check(tmp_path) == 0
    cache = await JudgeCache.open(tmp_path / "judge.sqlite")
    try:
        got = [await cache.get(f"k{i}") for i in range(5)]
    finally:
        await cache.close()
    assert got == [b'{"answer": 0}', None, b'{"answer": 2}', b'{"answer": 3}', b'{"answer": 4}']
    async with PageStore(tmp_path / "pages.sqlite") as store:
        pages = [await store.get(f"https://a.com/{i}") for i in range(3)]
    assert [p.text if p else None for p in pages] == ["Page 0 text.", "Page 1 text.", None]
    assert len(list(tmp_path.glob("*.bad-*"))) >= 2  # both damaged files kept aside


async def test_a_repair_keeps_what_earlier_runs_learned_of_the_model_and_the_endpoint(tmp_path: Path, capsys) -> None:
    from drscore.engine.runtime.calls.limits import KnownQuota
    from drscore.engine.runtime.calls.output_cap import TemplateCap
    from drscore.engine.runtime.calls.tokens import TokenFit

    cache = await JudgeCache.open(tmp_path / "judge.sqlite")
    await cache.put("k0", b'{"answer": 0}', COMPONENTS)
    await cache.put("k1", b'{"answer": 1}', COMPONENTS)
    cache.save_token_fit("m", TokenFit(saa=4.0, say=3.0, calls=2))
    cache.save_template_token_fit("m", "quality", TokenFit(saa=1.0, say=1.0, calls=1))
    cache.save_quota("https://x/v1 m", KnownQuota(rpm=500, tpm=30_000))
    lengths = TemplateCap(template_hash="h", answers=20, largest=300, sample=[(1_000, 300)])
    cache.save_output_cap("m", "quality", lengths)
    await cache.close()
    with sqlite3.connect(tmp_path / "judge.sqlite") as db:
        db.execute("UPDATE responses SET response = x'ff00' WHERE key = 'k1'")
    assert check(tmp_path, repair=True) == 0
    assert "rebuilt with 5 readable row(s)" in capsys.readouterr().out  # one answer, four learned rows
    cache = await JudgeCache.open(tmp_path / "judge.sqlite")
    try:
        assert await cache.token_fit("m") == TokenFit(saa=4.0, say=3.0, calls=2)
        assert await cache.template_token_fits("m") == {"quality": TokenFit(saa=1.0, say=1.0, calls=1)}
        assert await cache.quota("https://x/v1 m") == KnownQuota(rpm=500, tpm=30_000)
        assert await cache.output_caps("m") == {"quality": lengths}
    finally:
        await cache.close()
