"""Judge instructions in the task's language: detection, the --prompt-language flag, and
the request bodies a real HTTP judge receives for Chinese and English tasks."""
from __future__ import annotations

import hashlib

import orjson
import pytest
from aiohttp import web

from drscore import prompts
from drscore.engine.methods.language import detect_language, normalize_language, task_language, template_for
from drscore.engine.runtime.models import Task
from drscore.judge.mock.schema_fill import fill
from support.serve import serve


def _han_share(text: str) -> float:
    han = sum(1 for ch in text if "\u4e00" <= ch <= "\u9fff")
    return han / max(1, len(text.replace(" ", "")))


def test_detect_language_from_the_prompt():
    assert detect_language("收集整理目前中国9阶层实际收入和财务状况，特别研究得出中国的中产有哪些特点") == "zh"
    # Chinese with Latin acronyms and numbers is still Chinese
    assert detect_language("请分析 AI 芯片（GPU、TPU）在 2024 年的市场格局与主要厂商 NVIDIA 的策略") == "zh"
    assert detect_language("Compare the cost of solar and wind power in Europe since 2010.") == "en"
    # an English prompt quoting one Chinese term stays English
    assert detect_language("Explain what the term 内卷 means in Chinese workplace debates and why it spread.") == "en"
    assert detect_language("") == "en"


def test_language_field_wins_and_the_flag_forces():
    assert normalize_language("zh") == normalize_language("zh-CN") == normalize_language("Chinese") == "zh"
    assert normalize_language("en") == normalize_language("English") == "en"
    assert normalize_language("") is None and normalize_language(None) is None
    zh_text = Task(task_id="1", prompt="请比较欧洲太阳能和风能的成本变化")
    assert task_language(zh_text) == "zh"  # detected
    assert task_language(Task(task_id="1", prompt="请比较欧洲太阳能和风能的成本变化", language="en")) == "en"
    assert task_language(Task(task_id="2", prompt="Compare costs.", language="zh")) == "zh"
    assert task_language(zh_text, "en") == "en" and task_language(Task(task_id="3", prompt="x"), "zh") == "zh"
    with pytest.raises(ValueError, match="prompt-language"):
        task_language(zh_text, "fr")


def test_every_chinese_template_exists_with_the_same_inputs_and_is_chinese():
    for base in ("race_weights", "race_criteria", "race_score", "race_score_pointwise", "race_clean", "quality",
                 "redundancy_pair"):
        assert template_for(base, "zh") == f"{base}_zh" and template_for(base, "en") == base
        en, zh = prompts.load(base), prompts.load(f"{base}_zh")
        assert zh.variables == en.variables, base
        instructions = " ".join(text for _, text in zh.sections)
        assert _han_share(instructions) > 0.3, base
    assert template_for("race_vanilla", "zh") == "race_vanilla"  # no Chinese version: English


class _Capture:
    """A local OpenAI-compatible endpoint that records bodies and answers from the schema."""

    def __init__(self) -> None:
        self.bodies: list[dict] = []

    async def chat(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.bodies.append(body)
        seed = hashlib.sha256(orjson.dumps(body["messages"])).digest()
        answer = fill(body["response_format"]["json_schema"]["schema"], seed)
        return web.json_response({"choices": [{"message": {"content": orjson.dumps(answer).decode()},
                                               "finish_reason": "stop"}],
                                  "usage": {"prompt_tokens": 100, "completion_tokens": 20}})


@pytest.fixture
async def capture():
    ep = _Capture()
    app = web.Application()
    app.router.add_post("/v1/chat/completions", ep.chat)
    runner, base = await serve(app)
    yield f"{base}/v1", ep
    await runner.cleanup()


PARAS = ["Intro paragraph that sets the scene for the whole report and its questions.",
         "Solar module prices fell sharply over the decade as factories scaled up in Asia.",
         "Wind turbines grew taller, and offshore farms reached capacity factors above forty percent.",
         "Grid integration costs rose with the share of variable output on the network.",
         "Conclusion paragraph that sums up the comparison of the two technologies."]


async def _run(tmp_path, url: str, tasks: list[dict], extra: dict | None = None) -> None:
    from drscore.api import JudgeConfig, Run, RunConfig

    tasks_file = tmp_path / "tasks.jsonl"
    tasks_file.write_bytes(b"".join(orjson.dumps(t) + b"\n" for t in tasks))
    reports = tmp_path / "reports.jsonl"
    reports.write_bytes(b"".join(orjson.dumps({"task_id": t["id"], "agent": "a", "report": "\n\n".join(PARAS)})
                                 + b"\n" for t in tasks))
    cfg = RunConfig(methods=["quality", "redundancy", "race"], reports=[str(reports)], tasks=str(tasks_file),
                    judge=JudgeConfig(url=url, model="judge", no_cache=True),
                    method_options={"race_variant": "pointwise", "race_weight_samples": 1, **(extra or {})})
    async with Run(cfg) as run:
        async for _ in run.rows():
            pass


def _instructions(body: dict) -> str:
    return "\n".join(m["content"] for m in body["messages"])


async def test_chinese_tasks_get_chinese_instructions_in_the_request_body(tmp_path, capture):
    url, ep = capture
    tasks = [{"id": "zh1", "prompt": "比较欧洲太阳能与风能的成本", "language": "zh"},
             {"id": "zh2", "prompt": "比较欧洲太阳能与风能在过去十年的成本变化"},  # no field: detected
             {"id": "en1", "prompt": "Compare the costs of solar and wind power in Europe.", "language": "en"}]
    await _run(tmp_path, url, tasks)
    by_task: dict[str, list[str]] = {"zh1": [], "zh2": [], "en1": []}
    for body in ep.bodies:
        text = _instructions(body)
        tid = next(t["id"] for t in tasks if t["prompt"] in text) if any(t["prompt"] in text for t in tasks) \
            else "redundancy"
        by_task.setdefault(tid, []).append(text)
    for tid in ("zh1", "zh2"):
        assert by_task[tid], tid
        # quality, race weights, criteria and scoring: instructions in Chinese
        assert all("只用 JSON 作答" in t for t in by_task[tid]), tid
    assert by_task["en1"] and all("reply with json only" in " ".join(t.split()).lower() and "只用" not in t for t in by_task["en1"])
    pair_calls = [t for t in by_task.get("redundancy", [])]
    assert any("你检查研究报告中的重复内容" in t for t in pair_calls)
    assert any("You check research reports for repetition" in t for t in pair_calls)


async def test_prompt_language_en_forces_english(tmp_path, capture):
    url, ep = capture
    await _run(tmp_path, url, [{"id": "zh1", "prompt": "比较欧洲太阳能与风能的成本", "language": "zh"}],
               {"prompt_language": "en"})
    assert ep.bodies and all("只用 JSON 作答" not in _instructions(b) for b in ep.bodies)
