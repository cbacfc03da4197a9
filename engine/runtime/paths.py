"""Default locations."""
from __future__ import annotations

import os
from pathlib import Path

import platformdirs


def default_cache_dir() -> Path:
    """``$DRSCORE_CACHE`` or the user's cache directory (e.g. ``~/.cache/drscore``)."""
    env = os.environ.get("DRSCORE_CACHE")
    return Path(env) if env else Path(platformdirs.user_cache_dir("drscore"))
