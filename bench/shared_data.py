"""Where benchmarks find the full benchmark data (``../shared/data`` beside the checkout),
and the clear stop when it is missing: a plain clone has only the tests' slice in
``tests/data``, which is too small to measure on."""
from __future__ import annotations

import os
import sys
from pathlib import Path

# DRSCORE_SHARED_DATA: the data elsewhere (a git worktree's ../shared is not the checkout's)
SHARED_DATA = Path(os.environ.get("DRSCORE_SHARED_DATA") or Path(__file__).resolve().parents[1].parent / "shared" / "data")
DRB = SHARED_DATA / "drb"
RIGOROUS = SHARED_DATA / "rigorous"
EXIT_NO_DATA = 2


def require_data(bench: str, *paths: str | Path) -> None:
    """Exit with status 2 and one message naming the missing files unless all exist."""
    missing = [str(p) for p in paths if not Path(p).is_file()]
    if missing:
        print(f"bench.{bench}: benchmark data not found: {', '.join(missing)}\n"
              f"bench.{bench}: this benchmark reads the full benchmark data in {SHARED_DATA} (beside the "
              "checkout; see tests/data/README.md for its origin). Put the data there, or pass other "
              "files where the benchmark has an option for them.", file=sys.stderr)
        sys.exit(EXIT_NO_DATA)
