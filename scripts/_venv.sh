# Sourced by scripts/*: create .venv with the running python3 (>= 3.11) if missing, then install.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
py="${PYTHON:-python3}"
if ! "$py" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)'; then
  echo "drscore needs Python >= 3.11 (found: $("$py" --version 2>&1))" >&2; exit 1
fi
if [ ! -x .venv/bin/python ]; then
  "$py" -m venv .venv
fi
# $1 is the extras to install: "dev" (tests: everything) or e.g. "report" (the demo).
stamp=".venv/.installed-$1"
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ] || [ constraints.txt -nt "$stamp" ]; then
  echo "installing drscore[$1] into .venv (log: .venv/install.log) ..." >&2
  target=".[$1]"
  # constraints.txt pins the versions the test suite last passed with
  if ! { .venv/bin/python -m pip install --upgrade pip && .venv/bin/python -m pip install -c constraints.txt -e "$target"; } \
      > .venv/install.log 2>&1; then
    tail -n 40 .venv/install.log >&2
    echo "install failed; full log in .venv/install.log" >&2
    exit 1
  fi
  touch "$stamp"
fi
