"""``--prompts DIR``: a template of the same name replaces the built-in one; its hash is
in the cache key, so answers to one are never served for the other; the request the
judge receives carries the override's text."""
from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from aiohttp import web

from drscore import prompts
from drscore.api import JudgeConfig, open_pool
from drscore.cli import main
from drscore.engine.methods.quality import QualityVerdict
from drscore.engine.runtime.calls.cache import request_key
from drscore.judge.mock.server import MockConfig, MockServerProcess, build_app
from support.data import ROOT
from support.serve import serve

EXAMPLES = ROOT / "examples"
MARKER = "Answer as a strict examiner from the override directory."
VARS = {"question": "What limits battery storage?", "report": "Storage is limited by cost and supply."}


def override_dir(tmp_path: Path) -> Path:
    d = tmp_path / "my-prompts"
    d.mkdir()
    builtin = prompts.source_of("quality")
    (d / "quality.md").write_text(builtin.replace("## user\n", f"## user\n{MARKER}\n", 1), encoding="utf-8")
    return d


async def recording_mock() -> tuple[web.AppRunner, str, list[dict]]:
    """The project's mock judge in this loop, recording every request body it gets."""
    bodies: list[dict] = []
    app = build_app(MockConfig())

    @web.middleware
    async def record(request: web.Request, handler):  # type: ignore[no-untyped-def]
        if request.method == "POST" and request.path.endswith("/chat/completions"):
            bodies.append(orjson.loads(await request.read()))
        return await handler(request)

    app.middlewares.append(record)
    runner, base = await serve(app)
    return runner, f"{base}/v1", bodies


async def test_an_override_changes_the_request_and_the_cache_key(tmp_path):
    runner, url, bodies = await recording_mock()
    try:
        keys = {}
        for name, prompts_dir in (("builtin", None), ("override", override_dir(tmp_path))):
            jc = JudgeConfig(url=url, model="gpt-4.1", cache_dir=str(tmp_path / "cache"),
                             prompts_dir=str(prompts_dir) if prompts_dir else None)
            pool, cache = await open_pool(jc)
            try:
                _, components = pool.build("quality", QualityVerdict, VARS)
                judged = await pool.ask("quality", QualityVerdict, VARS)
                keys[name] = (judged.key, request_key(components), components["template_hash"], judged.cached)
                again = await pool.ask("quality", QualityVerdict, VARS)
                assert again.cached and again.key == judged.key  # each answer is cached under its own key
            finally:
                await pool.backend.close()
                await cache.close()
    finally:
        await runner.cleanup()
    builtin, override = keys["builtin"], keys["override"]
    assert builtin[0] == builtin[1] and override[0] == override[1]
    assert builtin[0] != override[0]  # a different key...
    assert override[2] == prompts.parse("quality", (tmp_path / "my-prompts" / "quality.md").read_text()).hash
    assert builtin[2] == prompts.load("quality").hash != override[2]  # ...because of the template hash
    assert not builtin[3] and not override[3]  # the override was not served the built-in answer
    # Two requests reached the judge (the repeats were cache hits); only the second has the override.
    assert len(bodies) == 2
    texts = ["\n".join(m["content"] for m in b["messages"]) for b in bodies]
    assert MARKER not in texts[0] and MARKER in texts[1]
    assert VARS["report"] in texts[1]  # same placeholders, filled the same way


def test_the_run_flag_reaches_the_judge(tmp_path):
    argv = ["run", "--methods", "quality", "--tasks", str(EXAMPLES / "tasks.jsonl"),
            "--reports", str(EXAMPLES / "reports.claude-3-7-sonnet.jsonl"), "--limit", "2",
            "--prompt-language", "en",  # the examples' first tasks are Chinese: pin the English template
            "--cache", str(tmp_path / "cache")]
    with MockServerProcess(MockConfig()) as mock:
        judge = ["--judge-url", mock.url, "--judge-model", "gpt-4.1"]
        assert main([*argv, *judge, "--out", str(tmp_path / "a")]) == 0
        first = mock.stats()["requests"]
        assert main([*argv, *judge, "--out", str(tmp_path / "b")]) == 0
        cached = mock.stats()["requests"] - first
        assert main([*argv, *judge, "--prompts", str(override_dir(tmp_path)), "--out", str(tmp_path / "c")]) == 0
        overridden = mock.stats()["requests"] - first - cached
    assert (first, cached, overridden) == (2, 0, 2)


def test_bad_overrides_are_refused_before_any_call(tmp_path, capsys):
    d = tmp_path / "p"
    d.mkdir()
    (d / "qualty.md").write_text("## user\n${question}\n")
    with pytest.raises(prompts.PromptOverrideError, match=r"qualty\.md: no built-in template named 'qualty'"):
        prompts.Library(d)
    (d / "qualty.md").unlink()
    (d / "quality.md").write_text("## user\nRate ${question} and ${answer}\n")
    with pytest.raises(prompts.PromptOverrideError,
                       match=r"quality\.md: placeholders differ .*unknown \['answer'\]; missing \['report'\]"):
        prompts.Library(d)
    code = main(["run", "--methods", "quality", "--tasks", str(EXAMPLES / "tasks.jsonl"), "--reports",
                 str(EXAMPLES / "reports.claude-3-7-sonnet.jsonl"), "--judge-url", "http://127.0.0.1:9/v1",
                 "--judge-model", "m", "--prompts", str(d), "--out", str(tmp_path / "run")])
    assert code == 1 and "placeholders differ" in capsys.readouterr().err
