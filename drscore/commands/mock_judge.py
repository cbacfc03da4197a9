"""``drscore mock-judge``: run the OpenAI-compatible mock judge server in the foreground.

Its flags are built from the mock's own table (:func:`drscore.judge.mock.server.config_flags`),
so a field added there is a flag here with nothing else to change."""
from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any, TypeVar

import click

from drscore.commands._framework import Command, fail, option, options, usage_error
from drscore.judge.mock.server import config_flags, config_from_args, serve

F = TypeVar("F", bound=Callable[..., Any])


def _mock_options(f: F) -> F:
    return options(*(option(f"--{name.replace('_', '-')}", name, type=kind, default=default,
                            help=f"{help_} (default: {default})")
                     for name, kind, help_, default in config_flags()))(f)


@click.command("mock-judge", cls=Command,
               short_help="run a local OpenAI-compatible mock judge (quotas, latency, faults)",
               help="Serve /v1/chat/completions with schema-valid JSON answers, RPM/TPM quotas "
                    "answered with 429 + Retry-After, latency, injected errors and malformed output; "
                    "GET /stats shows counters. Prints the base URL, then serves until Ctrl-C.")
@option("--host", default="127.0.0.1", help="interface to bind (default: 127.0.0.1)")
@option("--port", type=int, default=8089, help="port (0 = any free port; default: 8089)")
@_mock_options
def command(host: str, port: int, **fields: Any) -> int:
    """Validate the flags, start the server and block until interrupted."""
    try:
        cfg = config_from_args(fields)
    except ValueError as e:
        usage_error(str(e))

    def ready(bound: int) -> None:
        print(f"http://{host}:{bound}/v1", flush=True)
        limits = ", ".join(f"{name}={getattr(cfg, name)}" for name, *_ in config_flags() if name != "model")
        print(f"mock judge {cfg.model!r} ready ({limits}); stats at http://{host}:{bound}/stats; "
              "Ctrl-C to stop", file=sys.stderr, flush=True)

    try:
        serve(cfg, host, port, on_ready=ready)
    except OSError as e:
        fail(f"mock-judge cannot listen on {host}:{port}: {e.strerror or e}")
    except KeyboardInterrupt:
        pass
    return 0
