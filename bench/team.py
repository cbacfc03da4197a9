"""Team scale benchmark (issue 12): several processes, one quota, one real Redis on loopback.

Each scenario spawns real ``drscore run`` processes against the mock judge, every one told
the full quota (``--rpm``/``--tpm``, as each person on one key would be) and ``--redis``:

- ``rpm3`` / ``rpm6``: one job split with ``--shard K/N`` over 3 and 6 processes on one
  120 requests/min quota. Share of requests answered 429 and combined wall time (first
  spawn to last exit) over the physical limit (answered requests / RPM).
- ``tpm3``: the same over 3 processes where tokens/min binds (RPM generous).
- ``rerun``: after ``rpm3``, a 4th process with an empty local cache re-runs shard 1/3.
- ``dedup``: two processes score the same reports at the same moment; each call paid once?
- ``overhead``: one process, zero-latency mock, no limits: calls/s with and without ``--redis``.
- ``reserve``: reservations/s one Redis sustains for the quota script (Python clients in two
  processes, and redis-benchmark's C client with pipelining for the server's own ceiling).

    .venv/bin/python -m bench.team [--only rpm3,rerun] [--requests 240]
"""
from __future__ import annotations

import argparse
import asyncio
import csv
import io
import json
import multiprocessing
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson

from bench.machine import machine
from bench.overhead import _workload
from drscore.api import JudgeConfig, RunConfig, run_async
from drscore.engine.runtime.calls.team.local_server import LocalRedis
from drscore.judge.mock.server import MockConfig, MockServerProcess

SCENARIOS = ("rpm3", "rpm6", "rerun", "tpm3", "dedup", "overhead", "reserve")


def _workdir(tmp: Path, label: str, requests: int) -> tuple[Path, Path]:
    (tmp / label).mkdir(parents=True, exist_ok=True)
    return _workload(tmp / label, requests)


def _spawn(argv: list[str]) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "drscore.cli", *argv], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def _argv(tasks: Path, reports: Path, mock_url: str, redis_url: str, cache: Path, out: Path,
          *extra: str) -> list[str]:
    return ["run", "--methods", "quality", "--tasks", str(tasks), "--reports", str(reports), "--judge-url", mock_url,
            "--judge-model", "mock", "--cache", str(cache), "--out", str(out), "--redis", redis_url, "--json",
            *extra]


def _flush(redis_url: str) -> None:
    import redis

    client = redis.Redis.from_url(redis_url)
    client.flushall()
    client.close()


def _run_processes(argvs: list[list[str]]) -> tuple[float, list[dict]]:
    t0 = time.monotonic()
    procs = [_spawn(a) for a in argvs]
    outs = [p.communicate(timeout=1800) for p in procs]
    wall = time.monotonic() - t0
    for p, (out, err) in zip(procs, outs):
        if p.returncode not in (0, 3):
            raise RuntimeError(f"drscore run failed ({p.returncode}): {err[-2000:]}")
    return wall, [json.loads(out) for out, _ in outs]


def _quota_case(tmp: Path, redis_url: str, n_proc: int, requests: int, rpm: float, tpm: float,
                label: str) -> tuple[dict, dict]:
    """n_proc shards of one job on one quota; returns (figures, context for a re-run)."""
    _flush(redis_url)
    tasks, reports = _workdir(tmp, label, requests)
    limits = ["--rpm", str(rpm)] + (["--tpm", str(tpm)] if tpm else [])
    with MockServerProcess(MockConfig(rpm=rpm, tpm=tpm, latency=0.3, jitter=0.2, seed=7)) as mock:
        argvs = [_argv(tasks, reports, mock.url, redis_url, tmp / label / f"cache{k}", tmp / label / f"run{k}",
                       "--shard", f"{k}/{n_proc}", *limits) for k in range(1, n_proc + 1)]
        wall, summaries = _run_processes(argvs)
        s = mock.stats()
        charged = s["prompt_tokens"] + s["completion_tokens"]
        by_rpm = s["ok"] / rpm * 60
        by_tpm = charged / tpm * 60 if tpm else 0.0
        physical = max(by_rpm, by_tpm)
        figures = {
            "processes": n_proc, "rpm": rpm, "tpm": tpm or None, "items": sum(x["totals"]["items"] for x in summaries),
            "requests_sent": s["requests"], "requests_ok": s["ok"], "responses_429": s["rate_limited"],
            "share_429": round(s["rate_limited"] / max(1, s["requests"]), 4),
            "tokens_charged_by_server": charged, "binding": "tpm" if by_tpm > by_rpm else "rpm",
            "physical_limit_s": round(physical, 2), "wall_s": round(wall, 2),
            "server_span_s": round(s["last_request_at"] - s["first_request_at"], 2),
            "wall_over_limit": round(wall / physical, 3),
            "duplicate_answers": s["duplicate_ok"],
            "items_failed": sum(x["totals"]["items_failed"] for x in summaries),
            "per_process_calls": [x["totals"]["calls"] for x in summaries],
            "redis_degraded": any(x["team"]["degraded"] for x in summaries),
        }
        rerun = None
        if label == "rpm3":
            before = mock.stats()["requests"]
            t0 = time.monotonic()
            _, (again,) = _run_processes([_argv(tasks, reports, mock.url, redis_url, tmp / label / "cache-fresh",
                                                tmp / label / "rerun", "--shard", f"1/{n_proc}", *limits)])
            rerun = {"shard": f"1/{n_proc}", "items": again["totals"]["items"],
                     "endpoint_calls": mock.stats()["requests"] - before, "engine_calls": again["totals"]["calls"],
                     "redis_cache_hits": again["team"]["redis_cache_hits"],
                     "wall_s": round(time.monotonic() - t0, 2)}
    return figures, rerun or {}


def _dedup(tmp: Path, redis_url: str, requests: int) -> dict:
    _flush(redis_url)
    tasks, reports = _workdir(tmp, "dedup", requests)
    with MockServerProcess(MockConfig(latency=0.3, jitter=0.2, seed=7)) as mock:
        argvs = [_argv(tasks, reports, mock.url, redis_url, tmp / "dedup" / f"cache{k}", tmp / "dedup" / f"run{k}")
                 for k in (1, 2)]
        wall, summaries = _run_processes(argvs)
        s = mock.stats()
    if any(x["team"]["degraded"] for x in summaries):
        raise RuntimeError("Redis went away during the dedup run")
    return {"processes": 2, "same_reports_each": requests, "distinct_requests": s["distinct_requests"],
            "requests_ok": s["ok"], "paid_twice": s["duplicate_ok"],
            "per_process_calls": [x["totals"]["calls"] for x in summaries],
            "per_process_joined": [x["team"]["joined"] for x in summaries],
            "per_process_redis_cache_hits": [x["team"]["redis_cache_hits"] for x in summaries],
            "wall_s": round(wall, 2)}


async def _timed(cfg: RunConfig) -> tuple[float, dict]:
    from bench.timing import timed_run

    return await timed_run(cfg)


def _overhead(tmp: Path, redis_url: str, n: int, concurrency: int, rounds: int = 3) -> dict:
    """Alternating runs with and without --redis (the machine is shared: medians of rounds)."""
    import statistics

    tasks, reports = _workdir(tmp, "overhead", n)
    rates: dict[str, list[float]] = {"without_redis": [], "with_redis": []}
    with MockServerProcess(MockConfig()) as mock:
        for i in range(rounds):
            for label, redis in (("without_redis", None), ("with_redis", redis_url)):
                _flush(redis_url)
                mock.reset()
                cfg = RunConfig(methods=["quality"], reports=[str(reports)], tasks=str(tasks),
                                out=str(tmp / "overhead" / f"run-{label}-{i}"),
                                judge=JudgeConfig(url=mock.url, model="mock", concurrency=concurrency, redis=redis,
                                                  cache_dir=str(tmp / "overhead" / f"cache-{label}-{i}")))
                wall, summary = run_async(_timed(cfg))
                if summary.get("team", {}).get("degraded"):
                    raise RuntimeError(f"Redis went away during the overhead run: {summary['team']}")
                calls = mock.stats()["ok"]
                if calls != n:
                    raise RuntimeError(f"expected {n} network calls, the mock answered {calls}")
                rates[label].append(calls / wall)
    without, with_ = statistics.median(rates["without_redis"]), statistics.median(rates["with_redis"])
    return {"calls_per_run": n, "concurrency": concurrency, "rounds": rounds,
            "without_redis_calls_per_s": round(without, 1), "with_redis_calls_per_s": round(with_, 1),
            "all_rounds": {k: [round(v, 1) for v in vs] for k, vs in rates.items()},
            "with_over_without": round(with_ / without, 3),
            "added_client_ms_per_call": round(1000 / with_ - 1000 / without, 3)}


def _reserve_worker(redis_url: str, seconds: float, tasks: int, queue: multiprocessing.Queue) -> None:
    async def main() -> int:
        from drscore.engine.runtime.calls.team import open_team

        team = await open_team(redis_url, base_url="http://bench/v1", model="m", api_key=None)
        shape = (1e9, 1e9, 1e12, 1e12)  # never waits: measures the script, not the quota
        done = 0
        deadline = time.monotonic() + seconds

        async def loop() -> None:
            nonlocal done
            while time.monotonic() < deadline:
                await team.quota.reserve(1, 100, shape)
                done += 1

        await asyncio.gather(*(loop() for _ in range(tasks)))
        await team.close()
        return done

    queue.put(asyncio.run(main()))


def _reserve(redis_url: str, seconds: float) -> dict:
    _flush(redis_url)
    q: multiprocessing.Queue = multiprocessing.Queue()
    workers = [multiprocessing.Process(target=_reserve_worker, args=(redis_url, seconds, 32, q)) for _ in range(2)]
    for w in workers:
        w.start()
    counts = [q.get(timeout=seconds + 60) for _ in workers]
    for w in workers:
        w.join()
    out = {"python_clients": {"processes": 2, "tasks_each": 32, "seconds": seconds,
                              "reservations_per_s": round(sum(counts) / seconds, 1)}}
    # The server's own ceiling: redis-benchmark (C) running the same script by EVALSHA.
    import redis

    from drscore.engine.runtime.calls.team.quota import _SCRIPT

    client = redis.Redis.from_url(redis_url)
    sha = client.script_load(_SCRIPT)
    port = client.connection_pool.connection_kwargs["port"]
    client.close()
    for pipeline in (1, 16):
        cmd = ["redis-benchmark", "-h", "127.0.0.1", "-p", str(port), "-n", "200000", "-c", "50", "-P",
               str(pipeline), "--csv", "EVALSHA", sha, "2", "drscore:q:bench", "drscore:n:bench:pause", "reserve",
               "1e9", "1e9", "1e12", "1e12", "1", "100", "0"]
        try:
            res = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
            rows = list(csv.reader(io.StringIO(res.stdout)))
            rps = float(rows[-1][1]) if len(rows) >= 2 else None
        except (OSError, subprocess.TimeoutExpired, ValueError, IndexError):
            rps = None
        out[f"redis_benchmark_pipeline_{pipeline}_per_s"] = rps
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", default=",".join(SCENARIOS), help=f"comma-separated subset of {','.join(SCENARIOS)}")
    ap.add_argument("--requests", type=int, default=240, help="judge calls per quota scenario (default 240)")
    ap.add_argument("--rpm", type=float, default=120)
    ap.add_argument("--tpm", type=float, default=48_000,
                    help="tokens/min of the TPM-bound case (its calls use ~555 tokens: ~86 calls/min)")
    ap.add_argument("--overhead-calls", type=int, default=3000)
    args = ap.parse_args()
    only = set(args.only.split(","))
    result: dict = {"benchmark": "team", "workload": {"method": "quality", "requests_per_quota_case": args.requests,
                                                      "mock_latency_s": 0.3, "mock_jitter_s": 0.2}}
    with tempfile.TemporaryDirectory() as tmp_name, LocalRedis() as server:
        tmp = Path(tmp_name)
        if "rpm3" in only or "rerun" in only:
            result["rpm3"], rerun = _quota_case(tmp, server.url, 3, args.requests, args.rpm, 0, "rpm3")
            result["rerun_4th_process_empty_cache"] = rerun
        if "rpm6" in only:
            result["rpm6"], _ = _quota_case(tmp, server.url, 6, args.requests, args.rpm, 0, "rpm6")
        if "tpm3" in only:
            # tokens/min binds: requests/min twice the RPM case's, tokens/min below what that would use
            result["tpm3"], _ = _quota_case(tmp, server.url, 3, args.requests, args.rpm * 2, args.tpm, "tpm3")
        if "dedup" in only:
            result["dedup_same_calls_same_moment"] = _dedup(tmp, server.url, 60)
        if "overhead" in only:
            result["overhead_one_process_zero_latency"] = _overhead(tmp, server.url, args.overhead_calls, 64)
        if "reserve" in only:
            result["reserve_script_throughput"] = _reserve(server.url, 5.0)
    result["machine"] = machine()
    print(orjson.dumps(result, option=orjson.OPT_INDENT_2).decode())


if __name__ == "__main__":
    main()
