"""The installed distribution is namespaced (only ``drscore`` at the top of site-packages),
ships every room and its templates, and runs the same from a directory that holds folders
named like the repository's top level. Optional parts name their extra when missing."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

from drscore.engine.runtime import extras
from support.data import ROOT

EXAMPLES = ROOT / "examples"
SHADOWS = ("engine", "judge", "fetch", "prompts", "bench", "tests", "drscore_shadow_check")


def _pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def test_every_package_folder_is_listed_under_its_namespaced_name():
    setuptools = _pyproject()["tool"]["setuptools"]
    listed = set(setuptools["packages"])
    mapping = setuptools["package-dir"]
    on_disk = set()
    for name, folder in mapping.items():
        for init in (ROOT / folder).rglob("__init__.py"):
            rel = init.parent.relative_to(ROOT / folder)
            on_disk.add(".".join([name, *rel.parts]))
    # nested mapped folders (drscore.engine inside drscore's mapping) are found once per root
    assert on_disk == listed, f"missing from pyproject packages: {sorted(on_disk - listed)}; " \
                              f"listed but absent: {sorted(listed - on_disk)}"


def test_the_checked_in_links_spell_out_the_installed_layout():
    # Static tools (mypy, editors) resolve drscore.engine through drscore/engine -> ../engine.
    mapping = _pyproject()["tool"]["setuptools"]["package-dir"]
    for name, folder in mapping.items():
        if name == "drscore":
            continue
        link = ROOT / "drscore" / name.removeprefix("drscore.")
        assert link.is_symlink(), f"{link} should be a symlink to ../{folder}"
        assert os.readlink(link) == f"../{folder}"  # relative: valid in any clone
        assert link.resolve() == (ROOT / folder).resolve()


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    # Build from a copy: setuptools writes build/ and *.egg-info beside the sources.
    src = tmp_path_factory.mktemp("src")
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    for folder in _pyproject()["tool"]["setuptools"]["package-dir"].values():
        # symlinks kept, as a clone has them (drscore/engine -> ../engine, ...)
        shutil.copytree(ROOT / folder, src / folder, symlinks=True, ignore=shutil.ignore_patterns("__pycache__"))
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                    "-w", str(out), str(src)], check=True, cwd=out)
    (whl,) = out.glob("drscore-*.whl")
    return whl


def test_the_wheel_holds_only_drscore_at_the_top(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    assert len(names) == len(set(names))  # the links add no second copy of a room
    top = {n.split("/", 1)[0] for n in names}
    assert {t for t in top if not t.endswith(".dist-info")} == {"drscore"}
    for must in ("drscore/engine/runtime/calls/pool.py", "drscore/engine/methods/race/method.py",
                 "drscore/judge/mock/server.py", "drscore/fetch/guard.py", "drscore/prompts/quality.md",
                 "drscore/py.typed", "drscore/engine/reporting/view_static/view.mjs",
                 "drscore/engine/reporting/view_static/viewlib.mjs", "drscore/engine/reporting/view_static/view.css",
                 "drscore/engine/reporting/view_static/view.html", "drscore/engine/reporting/view_static/viewer.js"):
        assert must in names
    assert not any(n.startswith(("drscore/bench", "drscore/tests")) for n in names)


def _run_in(cwd: Path, out: Path) -> list[dict]:
    """Score two example reports offline through the API, started in ``cwd``."""
    script = (
        "import asyncio, drscore\n"
        "cfg = drscore.RunConfig(methods=['quality', 'redundancy'],\n"
        f"    tasks={str(EXAMPLES / 'tasks.jsonl')!r},\n"
        f"    reports=[{str(EXAMPLES / 'reports.claude-3-7-sonnet.jsonl')!r}],\n"
        f"    judge=drscore.JudgeConfig(cache_dir={str(out / 'cache')!r}), out={str(out)!r})\n"
        "async def main():\n"
        "    async with drscore.Run(cfg) as run:\n"
        "        async for _ in run.rows(): pass\n"
        "asyncio.run(main())\n")
    # `python -c` puts the working directory first on sys.path, as an interactive user has it
    subprocess.run([sys.executable, "-c", script], check=True, cwd=cwd, timeout=300)
    rows = [json.loads(line) for line in (out / "scores.jsonl").read_text().splitlines()]
    for row in rows:
        for timing in ("latency_s", "judge_s", "quota_wait_s", "shared_wait_s"):
            row.pop(timing, None)
    return rows


def test_folders_named_like_the_repository_in_the_working_directory_change_nothing(tmp_path):
    hostile = tmp_path / "hostile"
    for name in SHADOWS:
        (hostile / name).mkdir(parents=True)
        (hostile / name / "__init__.py").write_text(f"raise RuntimeError('imported the local {name}/')\n")
    neutral = tmp_path / "neutral"
    neutral.mkdir()
    here = _run_in(hostile, tmp_path / "run-hostile")
    there = _run_in(neutral, tmp_path / "run-neutral")
    assert here == there
    assert all(r["status"] in ("ok", "skipped") for r in here) and len(here) == 20


def test_a_missing_extra_is_named_with_its_install_command(monkeypatch):
    monkeypatch.setitem(extras.EXTRAS, "report", ("drscore_no_such_module_xyz",))
    assert not extras.has_extra("report")
    with pytest.raises(extras.MissingExtra) as err:
        extras.require("report", "the charts")
    assert "pip install 'drscore[report]'" in str(err.value)
    assert "drscore_no_such_module_xyz" in str(err.value)


def test_a_run_that_needs_pages_without_the_pages_extra_fails_at_the_start(tmp_path):
    # trafilatura hidden: the fact method must say which extra to install, before any work
    script = (
        "import sys; sys.modules['trafilatura'] = None\n"
        "from drscore.cli import main\n"
        f"sys.exit(main(['run', '--methods', 'fact', '--tasks', {str(EXAMPLES / 'tasks.jsonl')!r},\n"
        f"  '--reports', {str(EXAMPLES / 'reports.claude-3-7-sonnet.jsonl')!r},\n"
        f"  '--cache', {str(tmp_path / 'c')!r}, '--out', {str(tmp_path / 'run')!r}]))\n")
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1
    assert "pip install 'drscore[pages]'" in proc.stderr and "fact" in proc.stderr
    assert "Traceback" not in proc.stderr
