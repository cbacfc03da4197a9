"""A server process on a free loopback port, started and stopped by its owner.

For tests, benchmarks and trying a set-up on one machine: ``redis-server`` for team mode
(:mod:`drscore.engine.runtime.calls.team.local_server`) and llama.cpp's servers
(:mod:`drscore.judge.local_llama`). A subclass says how to launch the server and how to
ask it whether it is ready; starting (a fresh port per attempt), waiting and stopping are
here.
"""
from __future__ import annotations

import socket
import subprocess
import time
from typing import Any, Self


def free_port() -> int:
    """A loopback TCP port nobody listens on (bound and released at once)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def stop_process(proc: subprocess.Popen[Any], grace_s: float) -> None:
    """SIGTERM, then SIGKILL if ``proc`` has not exited after ``grace_s`` seconds."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(grace_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


class LocalProcess:
    """One server process; ``with Server(...) as s:`` starts it and stops it again."""

    kind = "server"
    attempts = 3  # a port found free may be taken before the server binds it: try another
    poll_s = 0.1  # between readiness probes
    stop_grace_s = 10.0

    def __init__(self, startup_timeout: float) -> None:
        self.startup_timeout = startup_timeout
        self.port: int | None = None
        self._proc: subprocess.Popen[bytes] | None = None

    def launch(self, port: int) -> subprocess.Popen[bytes]:
        """Start the server on ``port``."""
        raise NotImplementedError

    def ready(self) -> bool:
        """One probe of the started server: True once it answers (OSError: not yet)."""
        raise NotImplementedError

    def startup_log(self) -> str:
        """What the server said, for the error when it did not start."""
        return ""

    def cleanup(self) -> None:
        """Remove what the server left (its directory, its log) once it is stopped."""

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        for _ in range(self.attempts):
            self.port = free_port()
            self._proc = self.launch(self.port)
            if self._wait_ready():
                return
            self._kill()
        detail = self.startup_log()
        self.stop()
        raise RuntimeError(f"{self.kind} did not start: {detail}")

    def stop(self) -> None:
        """Stop the server (tests also use this to make it go away mid-run)."""
        self._kill()
        self.port = None
        self.cleanup()

    def _wait_ready(self) -> bool:
        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            if self._proc is None or self._proc.poll() is not None:
                return False
            try:
                if self.ready():
                    return True
            except OSError:
                pass
            time.sleep(self.poll_s)
        return False

    def _kill(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None:
            stop_process(proc, self.stop_grace_s)
