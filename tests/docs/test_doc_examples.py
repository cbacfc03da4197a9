"""Every example in README.md, docs/*.md and every ``--help`` runs as written (see
:mod:`support.examples` for the conventions), so an example that stops working fails CI."""
from __future__ import annotations

import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from support.examples import (
    ROOT, Example, Outcome, doc_pages, environment, help_examples, markdown_examples, prepare, run_example,
)


@pytest.fixture(scope="module")
def mock_judge():
    """One ``drscore mock-judge`` on a free port for every example of the module."""
    proc = subprocess.Popen([sys.executable, "-m", "drscore.cli", "mock-judge", "--port", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assert proc.stdout is not None
    url = proc.stdout.readline().strip()
    assert url.startswith("http://127.0.0.1:"), url
    try:
        yield url, int(url.rsplit(":", 1)[1].split("/")[0])
    finally:
        proc.terminate()
        proc.wait(timeout=30)


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    """A small finished run (offline judge, two agents) that examples reading a run
    directory are given."""
    out = tmp_path_factory.mktemp("template") / "run"
    ex = ROOT / "examples"
    proc = subprocess.run([sys.executable, "-m", "drscore.cli", "run", "--methods", "quality,redundancy",
                           "--tasks", str(ex / "tasks.jsonl"), "--reports", str(ex / "reports.claude-3-7-sonnet.jsonl"),
                           "--reports", str(ex / "reports.claude-first-half.jsonl"), "--limit", "4",
                           "--out", str(out), "--no-cache"],
                          capture_output=True, text=True, timeout=300,
                          env=environment(out.parent, "http://127.0.0.1:9/v1"))
    assert proc.returncode in (0, 3), proc.stderr[-2000:]
    return out


# The first test that uses `outcomes` runs every example (about 4 CPU-minutes in all): the
# per-test limit of pyproject.toml (300 s) is meant for one test, not for this batch.
pytestmark = pytest.mark.timeout(1800)

PAGES = [p for p in doc_pages() if markdown_examples(p)]
HELP = help_examples()
# Examples mostly wait (on subprocess start-up, on the quota an example sets): run them all
# at once in a few threads, each page or help text in its own folder, and report per test.
WORKERS = 4


def _page(page: Path, folder: Path, url: str, port: int, run_dir: Path) -> list[Outcome]:
    examples = [e for e in markdown_examples(page) if not e.not_run]
    prepare(folder, "\n".join(e.text for e in examples), run_dir)
    out = []
    for example in examples:
        out.append(run_example(example, folder, url, port))
        if not out[-1].ok:
            break  # the rest of the page may depend on it
    return out


def _help(example: Example, folder: Path, url: str, port: int, run_dir: Path) -> list[Outcome]:
    prepare(folder, example.text, run_dir)
    return [run_example(example, folder, url, port)]


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory, mock_judge, run_dir) -> dict[str, list[Outcome]]:
    url, port = mock_judge
    jobs = {str(p.relative_to(ROOT)): (_page, p) for p in PAGES}
    jobs.update({e.source: (_help, e) for e in HELP})
    with ThreadPoolExecutor(max_workers=WORKERS) as pool:
        futures = {key: pool.submit(fn, arg, tmp_path_factory.mktemp("example"), url, port, run_dir)
                   for key, (fn, arg) in jobs.items()}
        return {key: f.result() for key, f in futures.items()}


def _check(results: list[Outcome]) -> None:
    for outcome in results:
        e = outcome.example
        assert outcome.ok, f"{e.source}:\n{e.text}\n{outcome.detail}"


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_the_examples_of_a_page_run_top_to_bottom(page, outcomes):
    _check(outcomes[str(page.relative_to(ROOT))])


def test_every_help_has_examples_and_they_are_collected():
    assert len(HELP) >= 30 and sum(len(e.commands) for e in HELP) >= 35


@pytest.mark.parametrize("example", HELP, ids=[e.source[12:] for e in HELP])
def test_a_help_example_runs(example, outcomes):
    _check(outcomes[example.source])


def test_no_help_example_is_a_usage_error_in_an_empty_folder(tmp_path, mock_judge):
    """The files missing, an example may fail (exit 1), never with a usage error (2)."""
    url, port = mock_judge

    def status(i: int) -> tuple[str, str]:
        folder = tmp_path / str(i)
        folder.mkdir()
        example = HELP[i]
        outcome = run_example(example, folder, url, port)
        return example.text, outcome.detail

    with ThreadPoolExecutor(max_workers=WORKERS) as pool:
        results = list(pool.map(status, range(len(HELP))))
    usage = [(text, detail) for text, detail in results if "exit 2, expected" in detail]
    assert usage == []
