"""What the machine a benchmark ran on was like, so runs on different machines compare.

Shared cloud machines change speed from minute to minute (the same loop has taken 0.85 s
and 1.7 s on the same VM a quarter of an hour apart), so a benchmark reports a speed probe
taken when it starts and when it ends next to its own numbers.
"""

from __future__ import annotations

import os
import platform
import time
from typing import Any

PROBE_ROUNDS = 5


def _probe_once() -> float:
    """Thread CPU milliseconds of a fixed mix of the work Hubbub does: dicts, strings, lists."""
    started = time.thread_time()
    seen: dict[str, int] = {}
    for i in range(200_000):
        word = f"nick_{i % 997}"
        seen[word] = seen.get(word, 0) + len(word.split("_"))
    return (time.thread_time() - started) * 1000


def speed_probe_ms() -> float:
    """The fastest of a few probe rounds: lower is a faster machine."""
    return round(min(_probe_once() for _ in range(PROBE_ROUNDS)), 1)


def machine(probe_at_start: float) -> dict[str, Any]:
    """The ``machine`` section of a benchmark's JSON, probing again at the end."""
    return {
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "speed_probe_ms": {"start": probe_at_start, "end": speed_probe_ms()},
        "speed_probe": "bench/machine.py: fastest of 5 rounds of a fixed dict/str loop, "
        "thread CPU; compare numbers across runs only with similar probes",
    }
