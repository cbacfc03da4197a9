"""Python methods from outside the package. The worked example of docs/custom-methods.md,
installed as a plugin (a distribution's ``dist-info`` with an entry point in the group
``drscore.methods``, on a temporary import path: no venv, no pip), is discovered and run by
``drscore run`` with no edit to drscore; a plugin that fails to import is named with its
distribution and exception while the other methods run; ``--method-module`` imports a file
by path, and a module that fails is named with its file and line."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from drscore.judge.mock.server import MockConfig, MockServerProcess
from support.data import ROOT

EXAMPLES = ROOT / "examples"


def docs_example() -> str:
    """The worked example's code, as docs/custom-methods.md shows it."""
    page = (ROOT / "docs" / "custom-methods.md").read_text(encoding="utf-8")
    (code,) = re.findall(r"```python\n(\"\"\"acme_methods\.py.*?)```", page, re.S)
    assert 25 <= len(code.strip().splitlines()) <= 45  # the "30-line custom method" the docs promise
    return code


def install(site: Path, module: str, code: str, dist: str, version: str, entry_point: str) -> None:
    """What ``pip install`` leaves that entry-point discovery reads: the module and a
    ``dist-info`` with METADATA and entry_points.txt."""
    (site / f"{module}.py").write_text(code, encoding="utf-8")
    info = site / f"{dist.replace('-', '_')}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n", encoding="utf-8")
    (info / "entry_points.txt").write_text(f"[drscore.methods]\n{entry_point}\n", encoding="utf-8")


@pytest.fixture
def site(tmp_path) -> Path:
    site = tmp_path / "site"
    site.mkdir()
    install(site, "acme_methods", docs_example(), "acme-methods", "0.1", "opening = acme_methods:Opening")
    install(site, "broken_plugin", "import numpyy  # a dependency the plugin forgot\n", "broken-plugin", "0.2",
            "broken = broken_plugin:Broken")
    return site


def drscore(*args: str, site: Path | None, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DRSCORE_")}
    env["PYTHONPATH"] = os.pathsep.join([str(site)] if site else []) or ""
    return subprocess.run([sys.executable, "-m", "drscore.cli", *args], capture_output=True, text=True, env=env,
                          cwd=cwd, timeout=180)


def test_the_docs_example_installed_as_a_plugin_is_listed_and_run(tmp_path, site):
    listed = drscore("methods", site=site, cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    assert re.search(r"^opening\s+plugin acme-methods 0\.1\s+does the report's opening answer the question\? "
                     r"\(0-1\) \(options: --opening-words\)$", listed.stdout, re.M)
    assert re.search(r"^quality\s+built-in\s", listed.stdout, re.M)  # the others are all there
    assert ("warning: plugin 'broken = broken_plugin:Broken' of distribution broken-plugin 0.2 failed: "
            "ModuleNotFoundError: No module named 'numpyy'") in listed.stderr
    templates = drscore("prompts", "list", site=site, cwd=tmp_path)
    assert re.search(r"^opening\s+[0-9a-f]{16}\s+300\s+plugin acme-methods 0\.1\s+opening, question$",
                     templates.stdout, re.M)
    helped = drscore("run", "--help", site=site, cwd=tmp_path)
    assert "--opening-words" in helped.stdout  # a plugin's options are flags of drscore run

    with MockServerProcess(MockConfig()) as mock:
        run = drscore("run", "--methods", "opening,quality", "--tasks", str(EXAMPLES / "tasks.jsonl"),
                      "--reports", str(EXAMPLES / "reports.claude-3-7-sonnet.jsonl"), "--limit", "4",
                      "--judge-url", mock.url, "--judge-model", "mock-judge", "--cache", str(tmp_path / "cache"),
                      "--opening-words", "40", "--out", str(tmp_path / "run"), site=site, cwd=tmp_path)
        requests = mock.stats()["requests"]
    assert run.returncode == 0, run.stderr
    assert "broken-plugin 0.2 failed: ModuleNotFoundError" in run.stderr and "the other methods run" in run.stderr
    rows = [json.loads(x) for x in (tmp_path / "run" / "scores.jsonl").read_text().splitlines()]
    mine = [r for r in rows if r["method"] == "opening"]
    assert len(mine) == 4 and requests == 8
    for r in mine:  # the example's own arithmetic on the judge's answer
        assert r["status"] == "ok" and r["score"] in {0.0, *(p / 5 for p in range(6))}
        assert r["score"] in (0.0, r["subscores"]["precision"] / 5) and r["details"]["reason"]
    verdicts = [json.loads(x) for x in (tmp_path / "run" / "verdicts.jsonl").read_text().splitlines()]
    openings = [v for v in verdicts if v["template"] == "opening"]
    assert len(openings) == 4 and all(len(v["inputs"]["opening"].split()) == 40 for v in openings)

    # asking for the broken plugin's method: the error names it, and why
    failed = drscore("run", "--methods", "broken", "--reports", str(EXAMPLES / "reports.claude-3-7-sonnet.jsonl"),
                     site=site, cwd=tmp_path)
    assert failed.returncode == 1
    assert "unknown method(s) broken" in failed.stderr and "broken-plugin 0.2 failed: ModuleNotFoundError" in \
        failed.stderr and "Traceback" not in failed.stderr


def test_a_plugin_may_not_take_a_built_in_name(tmp_path):
    site = tmp_path / "site"
    site.mkdir()
    code = docs_example().replace('name: ClassVar[str] = "opening"', 'name: ClassVar[str] = "quality"')
    install(site, "impostor", code, "impostor", "1.0", "quality = impostor:Opening")
    listed = drscore("methods", "--json", site=site, cwd=tmp_path)
    data = json.loads(listed.stdout)
    assert {"name": "quality", "origin": "built-in"}.items() <= next(
        m for m in data["methods"] if m["name"] == "quality").items()
    assert data["plugin_problems"] == ["plugin impostor 1.0: method name 'quality' is taken by a built-in method; "
                                       "choose another name"]


def test_a_plugin_option_that_clashes_with_a_run_flag_is_left_out(tmp_path):
    site = tmp_path / "site"
    site.mkdir()
    code = docs_example().replace('drscore.Option("opening-words"', 'drscore.Option("limit"').replace(
        'self.opts["opening_words"]', 'self.opts["limit"]')
    install(site, "clashing", code, "clashing", "0.3", "opening = clashing:Opening")
    run = drscore("run", "--methods", "opening", "--tasks", str(EXAMPLES / "rubric_tasks.jsonl"), "--reports",
                  str(EXAMPLES / "rubric_reports.jsonl"), "--limit", "2", "--out", "runs/c",
                  site=site, cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert ("warning: plugin clashing 0.3: method 'opening' declares the option --limit, which drscore run "
            "already has; it keeps its default (300)") in run.stderr and "UserWarning" not in run.stderr
    verdicts = [json.loads(x) for x in (tmp_path / "runs" / "c" / "verdicts.jsonl").read_text().splitlines()]
    assert len(verdicts) == 2  # --limit 2 is the run's: two reports
    reports = [json.loads(x)["report"] for x in
               (EXAMPLES / "rubric_reports.jsonl").read_text(encoding="utf-8").splitlines()[:2]]
    for v, report in zip(verdicts, reports):  # the plugin read the first 300 words: its default
        opening = " ".join(report.split()[:300])
        assert len(report.split()) > 300 and v["inputs"]["opening"].endswith(f"[{len(opening):,} chars]")


def test_method_module_by_path(tmp_path):
    (tmp_path / "acme_methods.py").write_text(docs_example(), encoding="utf-8")
    run = drscore("run", "--method-module", "acme_methods.py", "--methods", "opening", "--tasks",
                  str(EXAMPLES / "tasks.jsonl"), "--reports", str(EXAMPLES / "reports.claude-first-half.jsonl"),
                  "--limit", "3", "--out", "runs/m", site=None, cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    rows = [json.loads(x) for x in (tmp_path / "runs" / "m" / "scores.jsonl").read_text().splitlines()]
    assert [r["method"] for r in rows] == ["opening"] * 3 and all(r["status"] == "ok" for r in rows)
    listed = drscore("methods", "--method-module", "acme_methods.py", site=None, cwd=tmp_path)
    assert re.search(r"^opening\s+module acme_methods\.py\s", listed.stdout, re.M)
    # a module that fails at import: its file and line, and the exception
    (tmp_path / "bad.py").write_text("import drscore\n\nLIMIT = int('ten')\n", encoding="utf-8")
    bad = drscore("methods", "--method-module", "bad.py", site=None, cwd=tmp_path)
    assert bad.returncode == 1 and "Traceback" not in bad.stderr
    assert ("drscore: error: bad.py:3: the method module failed to import: ValueError: invalid literal for int() "
            "with base 10: 'ten'") in bad.stderr
    (tmp_path / "empty.py").write_text("X = 1\n", encoding="utf-8")
    empty = drscore("methods", "--method-module", "empty.py", site=None, cwd=tmp_path)
    assert empty.returncode == 1 and "empty.py: defines no Method subclass with a name" in empty.stderr
    (tmp_path / "syntax.py").write_text("class A(\n", encoding="utf-8")
    syntax = drscore("methods", "--method-module", "syntax.py", site=None, cwd=tmp_path)
    assert syntax.returncode == 1 and re.search(r"syntax\.py:1: ", syntax.stderr)
