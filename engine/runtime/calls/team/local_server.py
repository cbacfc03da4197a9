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
from pathlib import Path

from drscore.engine.runtime.calls.local_process import LocalProcess


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


class LocalRedis(LocalProcess):
    """``with LocalRedis() as r: r.url`` -> ``redis://127.0.0.1:PORT/0``."""

    kind = "redis-server"
    attempts = 5
    poll_s = 0.05
    stop_grace_s = 5.0

    def __init__(self, startup_timeout: float = 15.0) -> None:
        super().__init__(startup_timeout)
        self._binary = ""
        self._dir: tempfile.TemporaryDirectory[str] | None = None

    @property
    def url(self) -> str:
        if self.port is None:
            raise RuntimeError("redis-server is not running")
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self._binary = find_redis_server()
        self._dir = tempfile.TemporaryDirectory(prefix="drscore-redis-")
        super().start()

    def launch(self, port: int) -> subprocess.Popen[bytes]:
        assert self._dir is not None
        return subprocess.Popen(
            [self._binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
             "--dir", self._dir.name, "--logfile", str(self._logfile()), "--daemonize", "no",
             "--protected-mode", "yes"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def ready(self) -> bool:
        with socket.create_connection(("127.0.0.1", self.port or 0), timeout=0.5) as s:
            s.sendall(b"PING\r\n")
            return s.recv(16).startswith(b"+PONG")

    def startup_log(self) -> str:
        log = self._logfile()
        return log.read_text(errors="replace")[-1500:] if log.exists() else ""

    def cleanup(self) -> None:
        if self._dir is not None:
            self._dir.cleanup()
            self._dir = None

    def _logfile(self) -> Path:
        return Path(self._dir.name if self._dir is not None else ".") / "redis.log"
