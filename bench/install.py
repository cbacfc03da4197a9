"""Install footprint: size and time of a fresh ``pip install`` of drscore, what it puts at
the top of site-packages, and the import time of ``drscore --help``.

    python -m bench.install                      # this checkout: base and [dev]
    python -m bench.install --source DIR --extras "" --extras dev
    python -m bench.install --constraints constraints.txt

Each case builds a new virtualenv in a temp dir and installs the project non-editable
(as a user would from a clone), so the top-level listing is what a user gets. pip's own
download cache is used (say ``--no-cache`` to measure cold downloads too); sizes exclude
pip and setuptools themselves.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.machine import machine

ROOT = Path(__file__).resolve().parents[1]
_TOOLING = {"pip", "setuptools", "_distutils_hack", "pkg_resources", "distutils-precedence.pth", "wheel"}


def _dir_size(path: Path) -> int:
    total = 0
    for dirpath, _, files in os.walk(path):
        for name in files:
            try:
                total += (Path(dirpath) / name).lstat().st_size
            except OSError:
                pass
    return total


def _site_packages(venv: Path) -> Path:
    return next((venv / "lib").glob("python3*/site-packages"))


def measure(source: Path, extras: str, constraints: Path | None, cache: bool) -> dict:
    with tempfile.TemporaryDirectory(prefix="drscore-install-") as tmp:
        venv = Path(tmp) / "venv"
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        py = venv / "bin" / "python"
        target = f"{source}[{extras}]" if extras else str(source)
        cmd = [str(py), "-m", "pip", "install", "-q", target]
        if constraints:
            cmd += ["-c", str(constraints.resolve())]
        if not cache:
            cmd.append("--no-cache-dir")
        t0 = time.monotonic()
        subprocess.run(cmd, check=True, cwd=tmp)
        install_s = time.monotonic() - t0
        site = _site_packages(venv)
        top = sorted(p.name for p in site.iterdir()
                     if p.name not in _TOOLING and not p.name.endswith((".dist-info", ".pth"))
                     and not p.name.startswith(("pip", "setuptools", "__pycache__")))
        tooling = sum(_dir_size(site / n) if (site / n).is_dir() else (site / n).stat().st_size
                      for n in os.listdir(site) if n.split("-")[0] in _TOOLING or n in _TOOLING)
        size = _dir_size(site) - tooling
        # import time of `drscore --help`, best of 5, from a directory with nothing in it
        runs = []
        for _ in range(5):
            t0 = time.monotonic()
            subprocess.run([str(venv / "bin" / "drscore"), "--help"], check=True, cwd=tmp,
                           stdout=subprocess.DEVNULL)
            runs.append(time.monotonic() - t0)
        ours = [n for n in top if n in ("drscore", "engine", "judge", "fetch", "prompts", "bench", "tests")]
        return {"extras": extras or "(base)", "install_s": round(install_s, 1),
                "site_packages_mb": round(size / 1e6, 1), "drscore_help_s": round(min(runs), 3),
                "project_top_level": ours, "distributions": len(list(site.glob("*.dist-info")))}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--source", type=Path, default=ROOT, help="project checkout to install (default: this one)")
    ap.add_argument("--extras", action="append", help="extras to measure (repeat; '' = base). Default: base and dev")
    ap.add_argument("--constraints", type=Path, help="pip constraints file")
    ap.add_argument("--no-cache", action="store_true", help="bypass pip's download cache")
    args = ap.parse_args()
    if shutil.which("git") and (args.source / ".git").exists():
        head = subprocess.run(["git", "-C", str(args.source), "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True).stdout.strip()
    else:
        head = None
    cases = [measure(args.source, e, args.constraints, not args.no_cache)
             for e in (args.extras if args.extras is not None else ["", "dev"])]
    print(json.dumps({"bench": "install", "source": str(args.source), "commit": head,
                      "pip_cache": not args.no_cache, "cases": cases, "machine": machine()}, indent=2))


if __name__ == "__main__":
    main()
