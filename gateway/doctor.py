"""``hubbub doctor``: check the setup and say in plain words what is wrong and how to fix it."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import redis
from sqlalchemy import text

from agent_core.config import Settings
from agent_core.db.engine import create_db_engine
from agent_core.db.migrations import current_revision, head_revision
from agent_core.tokens import encoding_name_for_model

TIMEOUT_SECONDS = 3.0
TOKENIZER_FILES = {
    "cl100k_base": "9b5ad71b2ce5302211f9c61530b329a4922fc6a4",
    "o200k_base": "fb374d419588a4632f3f557e76b4b70aebbca790",
}


@dataclass(frozen=True, slots=True)
class Check:
    """One finding."""

    name: str
    ok: bool
    detail: str
    fix: str = ""
    warning: bool = False
    """A problem that does not stop Hubbub from running."""


def check_database(settings: Settings) -> Check:
    """The database answers and its schema is current."""
    url = settings.resolved_database_url
    engine = create_db_engine(url)
    try:
        with engine.connect() as conn:
            conn.execute(text("SELECT 1"))
    except Exception as exc:
        return Check(
            "database",
            False,
            f"cannot connect to {engine.url.render_as_string(hide_password=True)}: "
            f"{str(exc).splitlines()[0][:200]}",
            "start the database or fix HUBBUB_DATABASE_URL "
            "(unset it to use the embedded SQLite file)",
        )
    finally:
        engine.dispose()
    current, head = current_revision(url), head_revision()
    if current != head:
        return Check(
            "database",
            False,
            f"schema is at {current or 'nothing'}, the code needs {head}",
            "run `hubbub migrate` (`hubbub up` migrates by itself)",
        )
    return Check("database", True, f"{engine.url.get_backend_name()} reachable, schema at {head}")


def check_broker(settings: Settings) -> Check:
    """Redis answers, or the embedded queue is in use."""
    if settings.redis_url is None:
        return Check(
            "broker",
            True,
            "embedded: turns run inside `hubbub up` (set HUBBUB_REDIS_URL for Celery workers)",
        )
    client = redis.Redis.from_url(
        settings.redis_url, socket_timeout=TIMEOUT_SECONDS, socket_connect_timeout=TIMEOUT_SECONDS
    )
    try:
        client.ping()
    except Exception as exc:
        return Check(
            "broker",
            False,
            f"Redis at HUBBUB_REDIS_URL does not answer: {exc}",
            "start Redis, or unset HUBBUB_REDIS_URL to run turns in-process",
        )
    finally:
        client.close()
    return Check("broker", True, "Redis reachable")


def check_model(settings: Settings) -> list[Check]:
    """A model is configured, its window is known and credentials are present."""
    if not settings.model:
        return [
            Check(
                "model",
                False,
                "HUBBUB_MODEL is not set: the gateway runs but cannot answer",
                "set HUBBUB_MODEL to a litellm model string, e.g. openai/gpt-4o-mini",
            )
        ]
    from agent_core.llm.litellm_model import known_context_length, missing_credentials

    checks = [Check("model", True, settings.model)]
    window = settings.context_length or known_context_length(settings.model)
    if window is None:
        checks.append(
            Check(
                "context window",
                False,
                f"litellm does not know the window of {settings.model}; a 128,000-token "
                "default is assumed",
                "set HUBBUB_CONTEXT_LENGTH (and HUBBUB_MAX_OUTPUT_TOKENS) for this model",
                warning=True,
            )
        )
    else:
        checks.append(Check("context window", True, f"{window:,} tokens"))
    missing = [] if settings.llm_api_key else missing_credentials(settings.model)
    if missing and not settings.llm_api_base:
        checks.append(
            Check(
                "credentials",
                False,
                f"no API key for {settings.model}: {', '.join(missing)} not set",
                "set HUBBUB_LLM_API_KEY or the provider's own variable",
                warning=True,
            )
        )
    else:
        checks.append(Check("credentials", True, "present (or a custom endpoint is set)"))
    return checks


def check_tokenizer(settings: Settings) -> Check:
    """Tiktoken can load its files without the network."""
    directory = os.environ.get("TIKTOKEN_CACHE_DIR")
    if not directory or not Path(directory).is_dir():
        return Check(
            "tokenizer",
            False,
            "TIKTOKEN_CACHE_DIR is not set to a folder; tiktoken would download its files",
            "reinstall Hubbub's dependencies (litellm ships the files) or set "
            "TIKTOKEN_CACHE_DIR to a folder holding them",
        )
    missing = [n for n, f in TOKENIZER_FILES.items() if not (Path(directory) / f).is_file()]
    if missing:
        return Check(
            "tokenizer",
            False,
            f"{', '.join(missing)} missing from {directory}",
            "reinstall litellm, which bundles them",
        )
    encoding = encoding_name_for_model(settings.model)
    try:
        from agent_core.tokens import TokenCounter

        TokenCounter(encoding).count_text("hello")
    except Exception as exc:
        return Check("tokenizer", False, f"{encoding} failed to load: {exc}", "reinstall tiktoken")
    return Check("tokenizer", True, f"{encoding} loads offline from {directory}")


def run_checks(settings: Settings) -> list[Check]:
    """Every check, in the order a person would fix things."""
    checks: list[Check] = []
    steps: list[Callable[[Settings], Check | list[Check]]] = [
        check_database,
        check_broker,
        check_model,
        check_tokenizer,
    ]
    for step in steps:
        result = step(settings)
        checks.extend(result if isinstance(result, list) else [result])
    return checks
