"""``hubbub doctor``: check the setup and say in plain words what is wrong and how to fix it."""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import redis
from alembic.runtime.migration import MigrationContext
from sqlalchemy import text
from sqlalchemy.exc import ArgumentError, NoSuchModuleError

from agent_core.config import Settings
from agent_core.db.engine import create_db_engine
from agent_core.db.migrations import head_revision
from agent_core.errors import (
    ProviderConfigError,
    ProviderError,
    ProviderRateLimited,
    ProviderUnreachable,
)
from agent_core.tokens import encoding_name_for_model

TIMEOUT_SECONDS = 3.0
"""Bound of each network check; the checks run in parallel, so doctor answers in seconds."""
_KEY_VARIABLE = re.compile(r"KEY|SECRET|TOKEN")
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


def _bad_database_url(exc: Exception) -> Check:
    reason = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
    return Check(
        "database",
        False,
        f"HUBBUB_DATABASE_URL is not a valid URL: {reason}",
        "use the form postgresql://user:password@host:5432/dbname "
        "(or unset it to use the embedded SQLite file)",
    )


def check_database(settings: Settings) -> Check:
    """The database URL parses, the database answers and its schema is current."""
    url = settings.resolved_database_url
    try:
        engine = create_db_engine(url, connect_timeout=int(TIMEOUT_SECONDS))
    except ArgumentError as exc:
        return _bad_database_url(exc)
    except NoSuchModuleError as exc:
        return _bad_database_url(exc)
    except ImportError as exc:
        return Check(
            "database",
            False,
            f"the database driver for HUBBUB_DATABASE_URL is not installed: {exc}",
            "use postgresql://… (psycopg 3, installed with Hubbub)",
        )
    try:
        with engine.connect() as conn:
            conn.execute(text("SELECT 1"))
            current = MigrationContext.configure(conn).get_current_revision()
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
    head = head_revision()
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
    """A model is configured, its window known, its key set, and it answers one token.

    The one-token call proves what only the provider can tell: that it accepts the key,
    serves the model, and listens at the configured endpoint.
    """
    if not settings.model:
        return [
            Check(
                "model",
                False,
                "HUBBUB_MODEL is not set: the gateway runs but cannot answer",
                "set HUBBUB_MODEL to a litellm model string, e.g. openai/gpt-4o-mini",
            )
        ]
    from agent_core.llm.errors import key_variables
    from agent_core.llm.litellm_model import (
        LiteLLMModel,
        known_context_length,
        missing_credentials,
    )

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
    keys = [name for name in missing if _KEY_VARIABLE.search(name)]
    if keys:
        local = " (any string will do for a local server that checks none)"
        checks.append(
            Check(
                "credentials",
                False,
                f"no API key for {settings.model}: {', '.join(keys)} not set",
                f"set {' or '.join([key_variables(settings.model)[0], *keys])}"
                + (local if settings.llm_api_base else ""),
            )
        )
        return checks
    checks.append(Check("credentials", True, "an API key is set (or the provider needs none)"))
    error = LiteLLMModel(settings.llm).probe(TIMEOUT_SECONDS)
    checks.append(_answer_check(settings, error))
    return checks


def _answer_check(settings: Settings, error: ProviderError | None) -> Check:
    """What one test completion said about the provider."""
    where = settings.llm_api_base or "the provider"
    if error is None:
        return Check("model answers", True, f"{settings.model} answered at {where}")
    if isinstance(error, ProviderConfigError | ProviderUnreachable):
        return Check("model answers", False, str(error), error.fix)
    if isinstance(error, ProviderRateLimited):
        return Check(
            "model answers", False, f"rate-limited: {error}", "turns wait and retry", warning=True
        )
    return Check(
        "model answers",
        False,
        f"no answer within {TIMEOUT_SECONDS:g} s or a provider failure: {error}",
        "check the provider is up (a local server may still be loading the model)",
        warning=True,
    )


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
    """Every check, in the order a person would fix things; run in parallel."""
    steps: list[Callable[[Settings], Check | list[Check]]] = [
        check_database,
        check_broker,
        check_model,
        check_tokenizer,
    ]
    with ThreadPoolExecutor(max_workers=len(steps), thread_name_prefix="doctor") as pool:
        futures = [pool.submit(step, settings) for step in steps]
        results = [future.result() for future in futures]
    checks: list[Check] = []
    for result in results:
        checks.extend(result if isinstance(result, list) else [result])
    return checks
