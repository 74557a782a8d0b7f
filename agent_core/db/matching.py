"""Substring tests that mean the same on Postgres and SQLite: the exact characters.

SQLite's ``LIKE`` ignores ASCII case, so ``column.contains(...)`` finds ``LiveCD`` when
``liveCD`` is asked for; ``instr`` (SQLite) and ``strpos`` (Postgres) do not, and need no
escaping of ``%`` or ``_``.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import ColumnElement, func
from sqlalchemy.orm import InstrumentedAttribute


def holds_exactly(
    column: ColumnElement[Any] | InstrumentedAttribute[Any], text: str, dialect: str
) -> ColumnElement[bool]:
    """Whether ``column`` contains ``text`` as written (case included)."""
    position = func.strpos if dialect == "postgresql" else func.instr
    return position(column, text) > 0
