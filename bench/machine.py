"""Describe the machine a benchmark ran on (benchmarks print this with their figures)."""
from __future__ import annotations

import os
import platform
import sys
import time


def machine() -> dict:
    info = {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "processor": platform.processor() or platform.machine(),
        "when": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    try:
        with open("/proc/loadavg") as f:
            info["loadavg"] = f.read().split()[:3]
    except OSError:
        pass
    return info
