"""Headless Chromium driven over the DevTools protocol, for tests of the HTML pages.

Debian's ``chromium`` (installed by ``scripts/install-chromium`` when missing) runs
headless with a throw-away profile; a small CDP client over aiohttp's websocket
(127.0.0.1 only) navigates, evaluates scripts and collects console errors, exceptions
and every network request the page makes.
"""
from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from support.data import ROOT

CHROMIUM = Path(os.environ.get("CHROMIUM", "/usr/bin/chromium"))
CHROMIUM_FLAGS = (
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--disable-dev-shm-usage", "--hide-scrollbars", "--remote-debugging-port=0",
)
STEP_TIMEOUT = 60.0


def ensure_chromium() -> Path:
    """Chromium's path; installs Debian's package through scripts/install-chromium when
    it is missing. Fails (never skips) when it cannot be had."""
    if os.access(CHROMIUM, os.X_OK):
        return CHROMIUM
    proc = subprocess.run([str(ROOT / "scripts" / "install-chromium")], capture_output=True,
                          text=True, timeout=900)
    if os.access(CHROMIUM, os.X_OK):
        return CHROMIUM
    pytest.fail(f"headless Chromium is required for the browser tests and {CHROMIUM} is "
                f"missing; scripts/install-chromium exited {proc.returncode}: "
                f"{(proc.stdout + proc.stderr)[-1500:]}\nInstall it (apt-get install chromium) "
                "or set CHROMIUM=/path/to/chromium.", pytrace=False)


class DevTools:
    """A minimal Chrome DevTools Protocol client for one page target."""

    def __init__(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        self.ws = ws
        self.events: list[dict[str, Any]] = []
        self._pending: dict[int, asyncio.Future] = {}
        self._next = 0
        self._arrived = asyncio.Event()
        self._reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        async for msg in self.ws:
            if msg.type != aiohttp.WSMsgType.TEXT:
                continue
            data = json.loads(msg.data)
            if "id" in data:
                future = self._pending.pop(data["id"], None)
                if future and not future.done():
                    if "error" in data:
                        future.set_exception(RuntimeError(f"CDP error: {data['error']}"))
                    else:
                        future.set_result(data.get("result", {}))
            else:
                self.events.append(data)
                self._arrived.set()

    async def call(self, method: str, **params: Any) -> dict[str, Any]:
        self._next += 1
        future = asyncio.get_running_loop().create_future()
        self._pending[self._next] = future
        await self.ws.send_json({"id": self._next, "method": method, "params": params})
        return await asyncio.wait_for(future, STEP_TIMEOUT)

    async def wait_for(self, method: str, after: int) -> None:
        """Wait for an event named ``method`` among events[after:]."""
        async def seen() -> None:
            while not any(e["method"] == method for e in self.events[after:]):
                self._arrived.clear()
                await self._arrived.wait()
        await asyncio.wait_for(seen(), STEP_TIMEOUT)

    async def evaluate(self, expression: str) -> Any:
        """Value of ``expression`` in the page (promises awaited); page exceptions raise."""
        reply = await self.call("Runtime.evaluate", expression=expression, awaitPromise=True,
                                returnByValue=True)
        if "exceptionDetails" in reply:
            raise AssertionError(f"script failed: {reply['exceptionDetails']}")
        return reply["result"].get("value")

    async def navigate(self, url: str) -> None:
        mark = len(self.events)
        await self.call("Page.navigate", url=url)
        await self.wait_for("Page.loadEventFired", mark)

    def requests(self) -> list[str]:
        return [e["params"]["request"]["url"] for e in self.events
                if e["method"] == "Network.requestWillBeSent"]

    def errors(self) -> list[str]:
        return console_errors(self.events)

    async def close(self) -> None:
        self._reader.cancel()
        await self.ws.close()


class Browser:
    """``async with Browser(chromium, profile) as cdp:`` one headless page, its
    Page/Runtime/Log/Network domains enabled."""

    def __init__(self, chromium: Path, profile: Path) -> None:
        self.chromium, self.profile = chromium, profile
        self._proc: asyncio.subprocess.Process | None = None
        self._http: aiohttp.ClientSession | None = None
        self._cdp: DevTools | None = None
        self._log: Any = None

    async def __aenter__(self) -> DevTools:
        self.profile.mkdir(parents=True, exist_ok=True)
        self._log = open(self.profile.parent / f"{self.profile.name}.chromium.log", "wb")
        self._proc = await asyncio.create_subprocess_exec(
            str(self.chromium), *CHROMIUM_FLAGS, f"--user-data-dir={self.profile}", "about:blank",
            stdout=asyncio.subprocess.DEVNULL, stderr=self._log, start_new_session=True)
        port_file = self.profile / "DevToolsActivePort"
        for _ in range(600):
            if port_file.exists() and port_file.read_text().strip():
                break
            assert self._proc.returncode is None, f"chromium exited early: {self._proc.returncode}"
            await asyncio.sleep(0.05)
        port = int(port_file.read_text().split()[0])
        self._http = aiohttp.ClientSession()
        async with self._http.get(f"http://127.0.0.1:{port}/json/list") as resp:
            targets = await resp.json()
        pages = [t for t in targets if t.get("type") == "page"]
        if not pages:
            async with self._http.put(f"http://127.0.0.1:{port}/json/new?about:blank") as resp:
                pages = [await resp.json()]
        ws = await self._http.ws_connect(pages[0]["webSocketDebuggerUrl"], max_msg_size=0)
        self._cdp = DevTools(ws)
        for domain in ("Page", "Runtime", "Log", "Network"):
            await self._cdp.call(f"{domain}.enable")
        return self._cdp

    async def __aexit__(self, *exc: Any) -> None:
        try:
            if self._cdp is not None:
                await self._cdp.close()
            if self._http is not None:
                await self._http.close()
        finally:
            if self._proc is not None:
                # Chromium's helpers (renderer, network and storage services) are its children in
                # its own process group: killing the browser alone left one writing the profile
                # while the test's temporary directory was being removed ("Directory not empty:
                # 'Default'", once in a CI run). The whole group goes, and is waited for.
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self._proc.pid, signal.SIGKILL)
                await self._proc.wait()
                await _group_gone(self._proc.pid)
            if self._log is not None:
                self._log.close()


async def _group_gone(group: int, within_s: float = 5.0) -> None:
    """Wait until no process of ``group`` is left (at most ``within_s``)."""
    for _ in range(int(within_s / 0.02)):
        try:
            os.killpg(group, 0)
        except ProcessLookupError:
            return
        await asyncio.sleep(0.02)


def console_errors(events: list[dict[str, Any]]) -> list[str]:
    """Console errors, uncaught exceptions and error log entries among CDP events."""
    errors = []
    for e in events:
        p = e.get("params", {})
        if e["method"] == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
            errors.append("console: " + " ".join(str(a.get("value", a.get("description")))
                                                  for a in p.get("args", [])))
        elif e["method"] == "Runtime.exceptionThrown":
            errors.append("exception: " + json.dumps(p.get("exceptionDetails", {}))[:300])
        elif e["method"] == "Log.entryAdded" and p.get("entry", {}).get("level") == "error":
            errors.append("log: " + p["entry"].get("text", ""))
    return errors


def off_disk(urls: list[str]) -> list[str]:
    """The requests that did not stay on disk (anything but file:, data:, about:)."""
    return [u for u in urls if not u.startswith(("file:", "data:", "about:"))]
