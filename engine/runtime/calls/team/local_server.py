"""A throwaway ``redis-server`` on a free loopback port, in a temporary directory.

For tests and benchmarks (and for trying ``--redis`` on one machine): no persistence,
bound to 127.0.0.1 only, stopped (and its directory removed) on exit. The binary comes
from the OS packages (``apt-get install redis-server``) or ``$DRSCORE_REDIS_SERVER``.
"""
from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path


class RedisServerMissing(RuntimeError):
    """No redis-server binary on this machine."""


def find_redis_server() -> str:
    """Path of the redis-server binary, or :class:`RedisServerMissing` saying how to get one."""
    explicit = os.environ.get("DRSCORE_REDIS_SERVER")
    if explicit:
        if not Path(explicit).is_file():
            raise RedisServerMissing(f"$DRSCORE_REDIS_SERVER={explicit} does not exist")
        return explicit
    found = shutil.which("redis-server") or next(
        (p for p in ("/usr/bin/redis-server", "/usr/local/bin/redis-server", "/usr/sbin/redis-server")
         if Path(p).is_file()), None)
    if found is None:
        raise RedisServerMissing(
            "redis-server not found: install it (Debian/Ubuntu: apt-get install redis-server; "
            "./scripts/test does this when it runs as root or with passwordless sudo) "
            "or point $DRSCORE_REDIS_SERVER at the binary")
    return found


def free_port() -> int:
    """A loopback TCP port nobody listens on (bound and released at once)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LocalRedis:
    """``with LocalRedis() as r: r.url`` -> ``redis://127.0.0.1:PORT/0``."""

    def __init__(self, startup_timeout: float = 15.0) -> None:
        self.startup_timeout = startup_timeout
        self.port: int | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._dir: tempfile.TemporaryDirectory[str] | None = None

    @property
    def url(self) -> str:
        if self.port is None:
            raise RuntimeError("redis-server is not running")
        return f"redis://127.0.0.1:{self.port}/0"

    def __enter__(self) -> LocalRedis:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        binary = find_redis_server()
        self._dir = tempfile.TemporaryDirectory(prefix="drscore-redis-")
        log = Path(self._dir.name) / "redis.log"
        for _ in range(5):  # a port found free may be taken before redis binds it: try another
            self.port = free_port()
            self._proc = subprocess.Popen(
                [binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                 "--dir", self._dir.name, "--logfile", str(log), "--daemonize", "no", "--protected-mode", "yes"],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            if self._wait_ready():
                return
            self._kill()
        detail = log.read_text(errors="replace")[-1500:] if log.exists() else ""
        self.stop()
        raise RuntimeError(f"redis-server did not start: {detail}")

    def _wait_ready(self) -> bool:
        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            if self._proc is None or self._proc.poll() is not None:
                return False
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as s:
                    s.sendall(b"PING\r\n")
                    if s.recv(16).startswith(b"+PONG"):
                        return True
            except OSError:
                pass
            time.sleep(0.05)
        return False

    def _kill(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    def stop(self) -> None:
        """Stop the server (used by tests to make Redis go away mid-run too)."""
        self._kill()
        self.port = None
        if self._dir is not None:
            self._dir.cleanup()
            self._dir = None
