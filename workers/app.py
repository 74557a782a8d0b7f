"""The Celery app of ``hubbub worker`` / ``celery -A workers.app worker``.

Like every Celery entry point it reads its settings from the environment at import.
"""

from __future__ import annotations

from agent_core.config import load_settings
from workers.broker import create_celery

app = create_celery(load_settings())
