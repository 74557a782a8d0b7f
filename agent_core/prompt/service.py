"""Restore a session's frozen system prompt, or build and persist it once."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import date

from sqlalchemy.orm import Session

from agent_core.db.base import utcnow
from agent_core.db.models import ChatSession
from agent_core.prompt.builder import PromptInputs, build_system_prompt
from agent_core.prompt.fingerprint import prompt_fingerprint

log = logging.getLogger(__name__)


def restore_or_build(
    db: Session,
    chat_session: ChatSession,
    inputs: PromptInputs,
    today: date,
    *,
    load_memory: Callable[[], Sequence[str]],
) -> str:
    """The session's system prompt, byte for byte as first built.

    It is rebuilt only when the session has none or what it was built from (model,
    toolset, persona, operator context) changed; compaction rebuilds it through
    :func:`rebuild`. Memory is read only when building: a restored prompt keeps the
    snapshot it was built with.
    """
    fingerprint = prompt_fingerprint(inputs)
    if chat_session.system_prompt is not None and chat_session.prompt_fingerprint == fingerprint:
        return chat_session.system_prompt
    if chat_session.system_prompt is not None:
        log.info("system prompt inputs changed, rebuilding", extra={"session_id": chat_session.id})
    return rebuild(db, chat_session, replace(inputs, memory=tuple(load_memory())), today)


def rebuild(db: Session, chat_session: ChatSession, inputs: PromptInputs, today: date) -> str:
    """Build the prompt from ``inputs`` now and freeze it on the session."""
    prompt = build_system_prompt(inputs, today)
    chat_session.system_prompt = prompt
    chat_session.prompt_fingerprint = prompt_fingerprint(inputs)
    chat_session.prompt_built_at = utcnow()
    db.flush()
    return prompt
