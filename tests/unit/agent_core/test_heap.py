"""Freezing the startup heap happens once, and what is made afterwards is still freed."""

import gc
import weakref

from agent_core.heap import freeze_startup_heap


class _Node:
    def __init__(self) -> None:
        self.other: _Node | None = None


def test_freezes_once_and_later_cycles_are_collected() -> None:
    freeze_startup_heap()
    frozen = gc.get_freeze_count()
    assert frozen > 0
    a, b = _Node(), _Node()
    a.other, b.other = b, a
    alive = weakref.ref(a)
    del a, b
    assert freeze_startup_heap() is False
    assert gc.get_freeze_count() == frozen
    gc.collect()
    assert alive() is None
