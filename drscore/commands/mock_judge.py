"""``drscore mock-judge``: run the OpenAI-compatible mock judge server in the foreground."""
from __future__ import annotations

import argparse
import sys

from drscore.judge.mock.server import add_config_arguments, config_from_args, serve


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``mock-judge`` sub-command."""
    p = subparsers.add_parser(
        "mock-judge",
        help="run a local OpenAI-compatible mock judge (quotas, latency, faults)",
        description=(
            "Serve /v1/chat/completions with schema-valid JSON answers, RPM/TPM quotas "
            "answered with 429 + Retry-After, latency, injected errors and malformed output; "
            "GET /stats shows counters. Prints the base URL, then serves until Ctrl-C."
        ),
    )
    p.add_argument("--host", default="127.0.0.1", help="interface to bind (default: 127.0.0.1)")
    p.add_argument("--port", type=int, default=8089, help="port (0 = any free port; default: 8089)")
    add_config_arguments(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Validate the flags, start the server and block until interrupted."""
    try:
        cfg = config_from_args(args)
    except ValueError as e:
        print(f"drscore mock-judge: {e}", file=sys.stderr)
        return 2

    def ready(port: int) -> None:
        print(f"http://{args.host}:{port}/v1", flush=True)
        limits = ", ".join(
            f"{name}={getattr(cfg, name)}" for name in ("rpm", "tpm", "burst", "latency", "jitter",
                                                         "error_rate", "malformed_rate", "seed",
                                                         "prefix_cache", "batch_delay", "reasoning_tokens",
                                                         "reasoning_style", "profile", "context_window",
                                                         "poison_rate", "filter_word"))
        print(f"mock judge {cfg.model!r} ready ({limits}); stats at http://{args.host}:{port}/stats; "
              "Ctrl-C to stop", file=sys.stderr, flush=True)

    try:
        serve(cfg, args.host, args.port, on_ready=ready)
    except OSError as e:
        print(f"drscore mock-judge: cannot listen on {args.host}:{args.port}: {e.strerror or e}",
              file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        pass
    return 0
