"""The dry run's input-token estimate against what an endpoint counts (issue 30).

The endpoint is the mock judge counting with GPT-4's tokenizer (``--tokenizer cl100k``):
a real byte-pair count, not the mock's word rule and not the client's character rule, so
the comparison is the one a user meets with a real provider. For each method (quality,
redundancy, ACE, RACE with the benchmark's criteria, FACT with cited pages served by a
local page server) on the 50 DeepResearch Bench reports with even ids (25 Chinese, 25
English tasks):

* ``prior``: ``--dry-run`` with an empty cache: the character rule.
* ``learned``: ``--dry-run`` with a cache that holds what earlier runs left: the model's
  token counting (model-wide and per template), the pages they fetched and the checklists
  ACE had the judge write, from all five methods on the other 50 reports (odd ids, other
  tasks): different reports, as a user's history would be.
* ``learned_model_wide``: the same, with the model-wide counting only (no template's own
  record: a template no earlier run used).
* ``counted``: the same method run for real on an empty cache; the mock's own count of
  every prompt it received.

Ratios are estimate / counted; ``stated_error_total`` is the bar the dry run states for its
total (two standard deviations), ``stated_error`` one call's. Planned and sent calls are printed too: where an answer
decides how many calls follow (ACE's checklist), the dry run plans with the lengths this
judge model's answers had in the cache (``planned_follow_ups``, with its error bar), or the
published protocol's figure on an empty cache.

    .venv/bin/python -m bench.dry_run [--methods quality,redundancy,ace,race,fact] [--drb DIR]
"""
from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import orjson

from bench.fact_e2e import MappedPages, page_server
from bench.machine import machine
from bench.shared_data import DRB, require_data

MODEL = "mock-cl100k"


async def _one(method: str, reports: list, tasks: dict, mock_url: str, cache: Path, *, dry: bool,
               options: dict, pages_base: str | None, seed_from: Path | None = None,
               templates: bool = True) -> dict[str, Any]:
    """One run of ``method`` (a dry one with ``dry``); ``seed_from``: a cache whose recorded
    token counting (per template too with ``templates``) and stored pages the dry run may use
    (what an earlier run left)."""
    from drscore.api import JudgeConfig, answer_lists, method_instances, open_pool
    from drscore.engine.runtime.calls.cache import JudgeCache
    from drscore.engine.runtime.calls.planned_input import overall_error
    from drscore.engine.runtime.evidence import PlaceholderPages
    from drscore.engine.runtime.runner import Runner
    from drscore.fetch.planning import planning_pages
    from drscore.fetch.pool import FetchPool

    methods = method_instances([method], options)
    if seed_from is not None:  # copy the recorded token counting, and of the answers only the follow-up deciding ones
        src = await JudgeCache.open(seed_from / "judge.sqlite")
        fit = await src.token_fit(MODEL)
        fits = await src.template_token_fits(MODEL) if templates else {}
        await src.close()
        dst = await JudgeCache.open(cache / "judge.sqlite")
        assert fit is not None
        dst.save_token_fit(MODEL, fit)
        for template, template_fit in fits.items():
            dst.save_template_token_fit(MODEL, template, template_fit)
        await dst.close()
        _copy_answers(seed_from / "judge.sqlite", cache / "judge.sqlite", list(answer_lists(methods)))
    pool, judge_cache = await open_pool(JudgeConfig(url=mock_url, model=MODEL, cache_dir=str(cache),
                                                    concurrency=32), dry_run=dry)
    executor = ThreadPoolExecutor(max_workers=2)
    try:
        if dry:
            await pool.load_answer_lists(answer_lists(methods))
        if not methods[0].needs_pages:
            pages = None
            rows = [r async for r in Runner(tasks=tasks, methods=methods, pool=pool, executor=executor).run(reports)]
        elif dry:
            planning, store = await planning_pages(seed_from) if seed_from is not None else (PlaceholderPages(), None)
            try:
                rows = [r async for r in Runner(tasks=tasks, methods=methods, pool=pool, pages=planning,
                                                executor=executor).run(reports)]
            finally:
                if store is not None:
                    await store.close()
        else:
            assert pages_base is not None
            async with FetchPool(cache, allow_networks=["127.0.0.1/32"], concurrency=32, per_host_concurrency=32,
                                 per_host_rate=1e6) as fetch_pool:
                pages = MappedPages(fetch_pool, pages_base)
                rows = [r async for r in Runner(tasks=tasks, methods=methods, pool=pool, pages=pages,
                                                executor=executor).run(reports)]
        error, basis = pool.input_estimate_error()
        planned = pool.planned_input()
    finally:
        pool.keep_token_counting()
        executor.shutdown(wait=False)
        await pool.backend.close()
        if judge_cache is not None:
            await judge_cache.close()
    s = pool.stats
    out: dict[str, Any] = {"rows": len(rows), "failed": sum(r.status == "failed" for r in rows)}
    if dry:
        out.update(calls=s.planned_calls, input_tokens=s.planned_input_tokens, stated_error=round(error, 4),
                   basis=basis, stated_error_total=round(overall_error(planned), 4),
                   by_template={t: {"tokens": p.tokens, "error": round(p.error, 4), "basis": p.basis}
                                for t, p in planned.items()})
        if pool.list_lengths:
            out["follow_ups"] = {t: n.summary() for t, n in pool.list_lengths.items()}
    else:
        out.update(calls=s.calls, input_tokens_reported=s.input_tokens)
    return out


def _copy_answers(src: Path, dst: Path, templates: list[str]) -> None:
    """The recorded answers of ``templates`` from one cache file into another."""
    if not templates:
        return
    import sqlite3

    db = sqlite3.connect(dst)
    try:
        db.execute("ATTACH DATABASE ? AS src", (str(src),))
        marks = ",".join("?" * len(templates))
        db.execute(f"INSERT OR IGNORE INTO responses SELECT * FROM src.responses WHERE template IN ({marks})",
                   templates)
        db.commit()
    finally:
        db.close()


async def run(methods: list[str], drb: Path) -> dict[str, Any]:
    from drscore.engine.runtime.io import iter_reports, load_tasks
    from drscore.judge.mock.server import MockConfig, MockServerProcess

    errors: list = []
    tasks = load_tasks(drb / "tasks.jsonl", errors)
    everything = list(iter_reports(drb / "reports.claude-3-7-sonnet.jsonl", fmt="drb", errors=errors, tasks=tasks))
    history = [r for r in everything if int(r.task_id) % 2 == 1]
    target = [r for r in everything if int(r.task_id) % 2 == 0]
    options = {"criteria": str(drb / "criteria.jsonl"), "references": str(drb / "reports.claude-3-7-sonnet.jsonl")}
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as d, page_server() as base, \
            MockServerProcess(MockConfig(tokenizer="cl100k", seed=5)) as mock:
        root = Path(d)
        out["history"] = {"reports": len(history)}
        for m in ("quality", "redundancy", "race", "fact", "ace"):  # what earlier runs leave: counting, pages, checklists
            out["history"][m] = await _one(m, history, tasks, mock.url, root / "history", dry=False, options=options,
                                           pages_base=base)
        for m in methods:
            t0 = time.perf_counter()
            prior = await _one(m, target, tasks, mock.url, root / f"{m}-prior", dry=True, options=options,
                               pages_base=base)
            learned = await _one(m, target, tasks, mock.url, root / f"{m}-learned", dry=True, options=options,
                                 pages_base=base, seed_from=root / "history")
            model_wide = await _one(m, target, tasks, mock.url, root / f"{m}-model-wide", dry=True, options=options,
                                    pages_base=base, seed_from=root / "history", templates=False)
            before = mock.stats()["prompt_tokens"]
            counted = await _one(m, target, tasks, mock.url, root / f"{m}-real", dry=False, options=options,
                                 pages_base=base)
            counted["input_tokens_counted"] = mock.stats()["prompt_tokens"] - before
            n = counted["input_tokens_counted"] or 1
            out[m] = {"prior": prior, "learned": learned, "learned_model_wide": model_wide, "counted": counted,
                      "prior_over_counted": round(prior["input_tokens"] / n, 3),
                      "learned_over_counted": round(learned["input_tokens"] / n, 3),
                      "learned_model_wide_over_counted": round(model_wide["input_tokens"] / n, 3),
                      "stated_error_total_prior_model_wide_learned": [
                          prior["stated_error_total"], model_wide["stated_error_total"], learned["stated_error_total"]],
                      "calls_prior_learned_counted": [prior["calls"], learned["calls"], counted["calls"]],
                      "seconds": round(time.perf_counter() - t0, 1)}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--methods", default="quality,redundancy,ace,race,fact")
    ap.add_argument("--drb", default=str(DRB), help="the folder of DeepResearch Bench's reports, tasks and criteria")
    args = ap.parse_args()
    drb = Path(args.drb)
    require_data("dry_run", drb / "reports.claude-3-7-sonnet.jsonl", drb / "tasks.jsonl", drb / "criteria.jsonl")
    result = asyncio.run(run([m.strip() for m in args.methods.split(",") if m.strip()], drb))
    print(orjson.dumps({"benchmark": "dry_run", "endpoint": "mock judge, tokenizer cl100k", "model": MODEL,
                        "reports": "DeepResearch Bench, the 50 with even ids", **result, "machine": machine()},
                       option=orjson.OPT_INDENT_2).decode())


if __name__ == "__main__":
    main()
