"""A run directory for the `drscore view` tests (and the docs' screenshots): real
DeepResearch Bench reports scored by the project's mock judge over HTTP, so the judge
cache holds every prompt and answer as a real endpoint's run would.

* Tasks 51-53 (English) of ``tests/data/drb``; three agents: Claude 3.7 Sonnet's reports,
  and two derived from them deterministically (every other blank-line block; the first
  half of the blocks), so scores differ and every pair has a paired difference.
* Methods: ReportEval quality and redundancy, RACE (the benchmark's criteria, the
  every-other agent's reports as the references) and FACT, whose cited pages come from a
  page snapshot made here (one short page per cited URL) loaded into the run's cache,
  with ``--offline-pages``: FACT's support calls see a page, no network is used.
* The mock judge thinks aloud (``reasoning_content``, as vLLM and DeepSeek return it) and
  answers a small share of requests 503 every time (``poison_rate``), and every request
  carrying one paragraph only Claude 3.7 Sonnet's report of task 53 has (``poison_match``):
  its quality row fails, other rows are partial, and failed calls show every attempt,
  whatever the other request bodies hash to.
"""
from __future__ import annotations

import hashlib
import json
import re
import time
from dataclasses import dataclass
from pathlib import Path

from drscore.cli import main as drscore_main
from drscore.engine.text.citations import parse_citations
from drscore.judge.mock.server import MockConfig, MockServerProcess
from support.data import DRB

TASK_IDS = ("51", "52", "53")
AGENTS = ("claude-3-7-sonnet", "claude-every-other", "claude-first-half")
METHODS = ("quality", "redundancy", "race", "fact")


def _blocks(article: str) -> list[str]:
    return [b for b in re.split(r"\n\s*\n", article) if b.strip()]


def derive(agent: str, article: str) -> str:
    """The report of a derived agent, from Claude 3.7 Sonnet's."""
    blocks = _blocks(article)
    if agent == "claude-every-other":
        return "\n\n".join(blocks[::2])
    if agent == "claude-first-half":
        return "\n\n".join(blocks[: max(1, len(blocks) // 2)] + [b for b in blocks if b.lstrip().startswith(
            ("## Reference", "# Reference", "References", "## Sources"))][:1])
    return article


def poisoned_paragraph(reports: Path) -> str:
    """A passage of the last odd-numbered block of task 53's report: in no derived agent's
    report (every other block keeps the even ones; the first half stops before it)."""
    for line in reports.read_text(encoding="utf-8").splitlines():
        r = json.loads(line)
        if str(r["id"]) == "53":
            blocks = _blocks(r["article"])
            odd = [b for i, b in enumerate(blocks) if i % 2 and i >= len(blocks) // 2 and len(b.strip()) > 80]
            return odd[-1].strip()[:60]
    raise AssertionError("task 53 is not in the view run's reports")


@dataclass
class ViewRun:
    run: Path
    cache: Path
    tasks: Path
    reports: dict[str, Path]


def write_inputs(tmp: Path) -> tuple[Path, dict[str, Path]]:
    def pick(path: Path) -> list[dict]:
        rows = [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]
        return [r for r in rows if str(r["id"]) in TASK_IDS]

    tasks = tmp / "tasks.jsonl"
    tasks.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in pick(DRB / "tasks.jsonl")),
                     encoding="utf-8")
    source = pick(DRB / "reports.claude-3-7-sonnet.jsonl")
    reports = {}
    for agent in AGENTS:
        path = reports[agent] = tmp / f"reports.{agent}.jsonl"
        path.write_text("".join(json.dumps({**r, "article": derive(agent, r["article"])}, ensure_ascii=False) + "\n"
                                for r in source), encoding="utf-8")
    return tasks, reports


def write_pages(reports: dict[str, Path], out: Path) -> int:
    """A page snapshot (``drscore pages import`` format) with one page per cited URL."""
    urls: set[str] = set()
    for path in reports.values():
        for line in path.read_text(encoding="utf-8").splitlines():
            urls.update(p.url for p in parse_citations(json.loads(line)["article"]).pairs)
    now = time.time()
    with open(out, "w", encoding="utf-8") as f:
        f.write(json.dumps({"format": "drscore-pages", "version": 1, "exported_at": now, "tool": "drscore"}) + "\n")
        for url in sorted(urls):
            text = (f"Cited page {url}. It reports the market sizes, growth rates and survey figures the "
                    "report quotes, with the year of each figure and its source.")
            f.write(json.dumps({"url": url, "status": "ok", "http_status": 200, "final_url": url, "fetched_at": now,
                                "content_hash": hashlib.sha256(text.encode()).hexdigest(), "detail": "",
                                "text": text}) + "\n")
        f.write(json.dumps({"end": True, "pages": len(urls)}) + "\n")
    return len(urls)


def make_view_run(tmp: Path, methods: tuple[str, ...] = METHODS, *, poison_rate: float = 0.01) -> ViewRun:
    tasks, reports = write_inputs(tmp)
    cache = tmp / "cache"
    snapshot = tmp / "pages.jsonl"
    write_pages(reports, snapshot)
    assert drscore_main(["pages", "--cache", str(cache), "import", str(snapshot)]) == 0
    out = tmp / "run"
    cfg = MockConfig(reasoning_tokens=24, reasoning_style="field", poison_rate=poison_rate, seed=7,
                     poison_match=poisoned_paragraph(tasks.parent / "reports.claude-3-7-sonnet.jsonl"))
    with MockServerProcess(cfg) as mock:
        argv = ["run", "--methods", ",".join(methods), "--tasks", str(tasks), "--judge-url", mock.url,
                "--judge-model", "mock", "--criteria", str(DRB / "criteria.jsonl"),
                "--references", str(reports["claude-every-other"]), "--offline-pages", "--max-retries", "1",
                "--cache", str(cache), "--out", str(out)]
        for path in reports.values():
            argv += ["--reports", str(path)]
        code = drscore_main(argv)
    assert code in (0, 3), f"drscore run exited {code}"  # 3: some items failed (poisoned calls)
    return ViewRun(run=out, cache=cache, tasks=tasks, reports=reports)
