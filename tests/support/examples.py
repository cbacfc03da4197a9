"""Every example a user can copy, collected and run as written.

Sources: the fenced blocks of README.md and docs/*.md, and the examples at the end of
every ``--help``. A block is an example when it is tagged ``console`` (its ``$ `` lines are
the commands), ``bash``/``sh``/``shell`` (every line), ``python``, or untagged and starting
with ``drscore``/``$ ``. Conventions in the Markdown:

* ``<!-- not run: REASON -->`` on the line before a block: the block is not executed (it
  opens a browser, runs forever, needs a real key or data that is not in the repository);
* ``# exit N`` at the end of a command: its expected exit status (default 0).

Each page runs top to bottom in one temporary folder (a page is read as a walk-through);
each ``--help`` example in a folder of its own. The files an example names are copied in
from ``examples/`` or ``tests/data/`` (by name, or by the small table :data:`FILES` for the
generic names the docs use), and a run directory it reads but does not write is made
first by a small offline run. Judge URLs point at one shared mock judge: the examples'
``http://127.0.0.1:8089/v1`` and the public endpoints are rewritten to it, and
``drscore mock-judge`` and ``drscore view`` are started on a free port, checked to serve, and stopped.
"""
from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent

# Generic file names the docs use -> the repository file that stands for them.
FILES: dict[str, str] = {
    "tasks.jsonl": "examples/tasks.jsonl",
    "reports.jsonl": "examples/reports.claude-3-7-sonnet.jsonl",
    "reports.a.jsonl": "examples/reports.claude-3-7-sonnet.jsonl",
    "reports.b.jsonl": "examples/reports.claude-first-half.jsonl",
    "r.jsonl": "examples/reports.claude-3-7-sonnet.jsonl",
    "criteria.jsonl": "examples/criteria.jsonl",
    "references.jsonl": "examples/reports.claude-first-half.jsonl",  # stands in for reference reports
    "a.jsonl": "examples/reports.claude-3-7-sonnet.jsonl",
    "b.jsonl": "examples/reports.claude-first-half.jsonl",
    "candidates.jsonl": "examples/tasks.jsonl",
    "bundles.jsonl": "tests/data/rigorous/bundles.jsonl",
    "general_rubrics.json": "tests/data/rigorous/general_rubrics.json",
}
SEARCH = (ROOT / "examples", ROOT / "tests" / "data")
# Endpoints that need a real key, replaced by the mock judge (same protocol).
PUBLIC_URLS = ("https://api.openai.com/v1", "http://127.0.0.1:8089/v1", "http://localhost:8089/v1")
SHELL_TAGS = {"console", "bash", "sh", "shell"}
NOT_RUN = re.compile(r"<!--\s*not run:\s*(.+?)\s*-->")
EXIT = re.compile(r"\s+#\s*exit\s+(\d+)\b[^#]*$")  # "# exit 1" or "# exit 1 (why)"
RUN_DIR = re.compile(r"(?<![\w/.-])(runs/[\w.-]+)")


@dataclass
class Command:
    text: str  # one shell command, continuation lines joined
    expect: int = 0


@dataclass
class Example:
    source: str  # "README.md:12" or "--help of drscore run"
    kind: str  # "shell" or "python"
    commands: list[Command] = field(default_factory=list)
    code: str = ""  # python
    not_run: str | None = None

    @property
    def text(self) -> str:
        return self.code if self.kind == "python" else "\n".join(c.text for c in self.commands)


def _commands(lines: list[str], console: bool) -> list[Command]:
    out: list[Command] = []
    pending = ""
    for raw in lines:
        line = raw.rstrip()
        if not pending:
            if console:
                if not line.startswith("$ "):
                    continue
                line = line[2:]
            elif not line.strip() or line.lstrip().startswith("#"):
                continue
        if line.endswith("\\"):
            pending += line[:-1].rstrip() + " "
            continue
        text = (pending + line.strip()).strip()
        pending = ""
        m = EXIT.search(text)
        expect = int(m.group(1)) if m else 0
        if m:
            text = text[:m.start()]
        text = re.sub(r"\s+#\s.*$", "", text)  # a trailing comment
        out.append(Command(text.strip(), expect))
    return out


def markdown_examples(path: Path) -> list[Example]:
    """The examples of one Markdown page, in order."""
    lines = path.read_text(encoding="utf-8").splitlines()
    rel = path.relative_to(ROOT)
    out: list[Example] = []
    i = 0
    while i < len(lines):
        m = re.match(r"^(\s*)(```+|~~~+)\s*([\w+-]*)", lines[i])
        if not m:
            i += 1
            continue
        fence, tag = m.group(2), m.group(3).lower()
        start = i
        body: list[str] = []
        i += 1
        while i < len(lines) and not lines[i].strip().startswith(fence):
            body.append(lines[i][len(m.group(1)):] if lines[i].startswith(m.group(1)) else lines[i])
            i += 1
        i += 1
        before = next((lines[k] for k in range(start - 1, -1, -1) if lines[k].strip()), "")
        skip = NOT_RUN.search(before)
        first = next((b.strip() for b in body if b.strip()), "")
        where = f"{rel}:{start + 1}"
        if tag == "python":
            out.append(Example(where, "python", code="\n".join(body) + "\n",
                               not_run=skip.group(1) if skip else None))
        elif tag in SHELL_TAGS or (not tag and (first.startswith("drscore ") or first.startswith("$ "))):
            console = tag == "console" or first.startswith("$ ")
            cmds = _commands(body, console)
            if cmds:
                out.append(Example(where, "shell", cmds, not_run=skip.group(1) if skip else None))
    return out


def doc_pages() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def help_examples() -> list[Example]:
    """The examples printed at the end of every ``--help``: one :class:`Example` per
    command, its lines run in order in one folder (a later line may use an earlier one's file)."""
    from drscore.cli import build_cli, walk
    from drscore.commands._framework import help_text

    out = []
    for path, command, _ in walk(build_cli()):
        text = help_text(command, path)
        m = re.search(r"^examples?:\n((?:  .*\n?)+)", text, re.MULTILINE)
        if not m:
            continue
        out.append(Example(f"--help of {' '.join(('drscore', *path))}", "shell",
                           _commands([line.strip() for line in m.group(1).splitlines()], console=False)))
    return out


# --------------------------------------------------------------------------- running


@dataclass
class Outcome:
    example: Example
    ok: bool
    detail: str = ""


def _names(text: str) -> set[str]:
    return {t for t in re.findall(r"[\w./~-]+\.(?:jsonl|json|toml|gz|md)\b", text)}


def _source_for(name: str) -> Path | None:
    base = Path(name).name
    if base in FILES:
        return ROOT / FILES[base]
    for folder in SEARCH:
        hits = sorted(folder.rglob(base))
        if hits:
            return hits[0]
    return None


def prepare(folder: Path, text: str, run_dir_template: Path | None) -> None:
    """Copy the files ``text`` names into ``folder`` and make the run directories it
    reads (those it never writes with ``--out``)."""
    written = set(re.findall(r"(?:--out\s+|out\s*=\s*[\"'])(runs/[\w.-]+)", text))
    for name in sorted(_names(text)):
        if name.startswith(("/", "~")) or (folder / name).exists():
            continue
        src = _source_for(name)
        if src is not None and not any(name.startswith(d + "/") for d in written):
            (folder / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(src, folder / name)
    if run_dir_template is not None:
        for run in sorted(set(RUN_DIR.findall(text)) - written):
            if not (folder / run).exists():
                shutil.copytree(run_dir_template, folder / run)


def environment(folder: Path, mock_url: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DRSCORE_", "OPENAI_"))}
    env.update({
        "PATH": f"{BIN}{os.pathsep}{env.get('PATH', '')}",
        "HOME": str(folder / ".home"),  # ~/.cache/drscore and the like stay in the folder
        "DRSCORE_CACHE": str(folder / ".cache"),
        "DRSCORE_PROGRESS": "off",
        "OPENAI_API_KEY": "sk-mock-not-a-real-key",  # the mock takes any key
        "PYTHONPATH": str(ROOT),
    })
    (folder / ".home").mkdir(exist_ok=True)
    return env


def rewrite(text: str, mock_url: str, mock_port: int) -> str:
    for url in PUBLIC_URLS:
        text = text.replace(url, mock_url)
    return text.replace("127.0.0.1:8089", f"127.0.0.1:{mock_port}")


# A bash prelude: `drscore mock-judge ...` and `drscore view ...` serve forever, so they are
# started on a free port, checked to print their address, and stopped; everything else runs
# as written.
_PRELUDE = r"""
set -o pipefail
serve_briefly() {
  local out; out=$(mktemp)
  "$@" > "$out" 2>/dev/null &
  local pid=$!
  # up to 60 s to start: a loaded CI machine can take well over 10 s to import and bind
  for _ in $(seq 1 600); do
    if grep -q 'http://' "$out"; then
      kill -INT $pid  # as Ctrl-C: a server that ignores it fails here instead of hanging the suite
      for _ in $(seq 1 50); do kill -0 $pid 2>/dev/null || break; sleep 0.1; done
      if kill -0 $pid 2>/dev/null; then
        echo "EXAMPLE FAILED ($*): still serving 5 s after SIGINT" >&2; kill -KILL $pid; rm -f "$out"; return 98
      fi
      wait $pid; rm -f "$out"; return 0
    fi
    if ! kill -0 $pid 2>/dev/null; then wait $pid; local s=$?; rm -f "$out"; return $s; fi
    sleep 0.1
  done
  kill $pid; rm -f "$out"; return 1
}
check() {  # check EXPECTED SOURCE -- the command's status against what the docs say
  local got=$1 want=$2; shift 2
  if [ "$got" != "$want" ]; then echo "EXAMPLE FAILED ($*): exit $got, expected $want" >&2; exit 97; fi
}
"""


def _script(example: Example, mock_url: str, mock_port: int) -> str:
    lines = [_PRELUDE]
    for c in example.commands:
        text = rewrite(c.text, mock_url, mock_port)
        if text.startswith(("drscore mock-judge", "drscore view")):
            text = "serve_briefly " + re.sub(r"--port\s+\d+", "--port 0", text).rstrip("& ")
        elif text.endswith("&") and "mock-judge" in text:
            text = "serve_briefly " + re.sub(r"--port\s+\d+", "--port 0", text[:-1])
        lines.append(f"{text}\ncheck $? {c.expect} {shlex.quote(c.text[:120])}")
    return "\n".join(lines) + "\n"


def run_example(example: Example, folder: Path, mock_url: str, mock_port: int,
                 timeout: float = 300) -> Outcome:
    env = environment(folder, mock_url)
    if example.kind == "python":
        code = rewrite(example.code, mock_url, mock_port)
        proc = subprocess.run([sys.executable, "-c", code], cwd=folder, env=env, capture_output=True,
                              text=True, timeout=timeout)
        ok = proc.returncode == 0 and "Traceback" not in proc.stderr
        return Outcome(example, ok, f"exit {proc.returncode}\n{proc.stdout[-1500:]}\n{proc.stderr[-3000:]}")
    proc = subprocess.run(["bash", "-c", _script(example, mock_url, mock_port)], cwd=folder, env=env,
                          capture_output=True, text=True, timeout=timeout)
    ok = proc.returncode == 0 and "Traceback" not in proc.stderr
    return Outcome(example, ok, f"exit {proc.returncode}\n{proc.stdout[-1500:]}\n{proc.stderr[-3000:]}")
