"""The page code of `drscore view` (engine/reporting/view_static/*.mjs) and of viewer.html
(viewer.js) is real JavaScript:
node parses every file (``node --check``) and node's test runner runs the unit tests of
its pure part (``tests/engine/reporting/js``). scripts/test installs Node.js when missing."""
from __future__ import annotations

import shutil
import subprocess

import pytest

from support.data import ROOT

STATIC = ROOT / "engine" / "reporting" / "view_static"


def _node() -> str:
    node = shutil.which("node") or shutil.which("nodejs")
    if node is None:
        pytest.fail("Node.js is required for the page's JS tests and is missing: scripts/test installs it "
                    "(apt-get install nodejs)", pytrace=False)
    return node


def test_every_page_script_parses() -> None:
    scripts = sorted([*STATIC.glob("*.mjs"), *STATIC.glob("*.js")])
    assert [p.name for p in scripts] == ["view.mjs", "viewer.js", "viewlib.mjs"]
    for path in scripts:
        proc = subprocess.run([_node(), "--check", str(path)], capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0, f"{path.name}: {proc.stderr}"


def test_the_page_library_passes_its_node_tests() -> None:
    proc = subprocess.run([_node(), "--test", str(ROOT / "tests" / "engine" / "reporting" / "js")],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    summary = dict(line[2:].split(" ", 1) for line in proc.stdout.splitlines()
                   if line.startswith("# ") and line[2:].split(" ", 1)[0] in ("tests", "pass", "fail"))
    assert summary["fail"] == "0" and int(summary["pass"]) == int(summary["tests"]) >= 12
