"""The built-in web chat: a page at ``/`` and a small JSON API behind it."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from importlib import resources
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path, Query, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import HTMLResponse, JSONResponse
from pydantic import BaseModel, Field, model_validator

from adapters.commands import parse_command
from adapters.messages import InboundMessage
from adapters.text import storable
from adapters.webchat.feed import STREAM_META_KEY, Feed, message_event
from adapters.webchat.formatting import to_html
from adapters.webchat.ids import message_key
from agent_core.db.engine import transaction
from agent_core.db.models import DEFAULT_TENANT_ID, Message, MessageKind
from agent_core.errors import UnknownConversation
from agent_core.sessions.repository import SessionRepository
from agent_core.sessions.service import Conversation as ConversationKey
from gateway.dependencies import get_runtime
from gateway.errors import documented
from gateway.routes.webchat_access import Browser, BrowserCookies
from workers.bots import ENV_BOT_NAME
from workers.runtime import Runtime

router = APIRouter(tags=["webchat"])

PLATFORM = "webchat"
CONVERSATION_ID = r"^[A-Za-z0-9_-]{1,64}$"
DEFAULT_LIST_LIMIT = 200
MAX_LIST_LIMIT = 1000

ConversationId = Annotated[
    str,
    Path(pattern=CONVERSATION_ID, description="letters, digits, '-' and '_', at most 64"),
]


class PostMessage(BaseModel):
    """A message typed into the web chat."""

    text: str = Field(description="the message; commands such as /new and /help work too")
    user: str | None = Field(
        None,
        max_length=128,
        description="who is typing; in public mode only a display name, never an identity",
    )
    id: str | None = Field(
        None,
        max_length=128,
        description="client-chosen message id; sending it again in the same conversation "
        "is a no-op",
    )
    stream: bool = Field(
        False,
        description="the client will listen to the conversation's event stream: the reply "
        "is streamed there as drafts even if the stream opens after this post (it is also "
        "streamed whenever a stream is open as the turn starts)",
    )

    @model_validator(mode="before")
    @classmethod
    def _storable(cls, data: Any) -> Any:
        """Clean before the length checks, which refuse a lone surrogate (adapters.text)."""
        return storable(data) if isinstance(data, dict) else data


class Accepted(BaseModel):
    """The stored message."""

    id: str
    conversation_id: str
    duplicate: bool


class ChatLine(BaseModel):
    """One line of the conversation as people see it."""

    id: str
    role: str
    text: str
    created_at: datetime
    kind: str
    user: str | None = None
    html: str | None = None
    """An assistant reply's Markdown as safe HTML (no raw HTML, images or unsafe links)."""
    reply_to: str | None = None
    """For the assistant's lines: the id of the line it answers (what a draft names)."""


class ConversationView(BaseModel):
    """The conversation, oldest first."""

    conversation_id: str
    messages: list[ChatLine]
    pending: bool
    """A reply is being written."""


class Status(BaseModel):
    """What the page needs to know before the first message."""

    model: str | None
    model_configured: bool
    setup_hint: str | None


@router.get("/", response_class=HTMLResponse, include_in_schema=False)
def page() -> HTMLResponse:
    """The chat page."""
    html = resources.files("gateway").joinpath("static/index.html").read_text(encoding="utf-8")
    return HTMLResponse(html)


@router.get("/api/webchat/status")
def status(runtime: Annotated[Runtime, Depends(get_runtime)]) -> Status:
    """Whether a model is configured, and what to set when it is not."""
    model = runtime.settings.model
    hint = None
    if model is None:
        hint = (
            "Set HUBBUB_MODEL to a litellm model string (for example openai/gpt-4o-mini or "
            "ollama/llama3.1) and the provider's key (HUBBUB_LLM_API_KEY or e.g. "
            "OPENAI_API_KEY), then restart `hubbub up`."
        )
    return Status(model=model, model_configured=model is not None, setup_hint=hint)


def browser_cookies(request: Request) -> BrowserCookies | None:
    """The public mode's cookie signer, or ``None`` in ``local`` mode."""
    cookies: BrowserCookies | None = request.app.state.webchat_cookies
    return cookies


def _webchat_bot_id(runtime: Runtime) -> int:
    bot = runtime.bots.resolve(DEFAULT_TENANT_ID, PLATFORM, ENV_BOT_NAME)
    assert bot is not None, "the web chat bot always exists"
    return bot.id


@router.post(
    "/api/webchat/{conversation_id}/messages",
    status_code=202,
    responses=documented(403, 404, 422, 503),
)
async def post_message(
    conversation_id: ConversationId,
    body: PostMessage,
    request: Request,
    runtime: Annotated[Runtime, Depends(get_runtime)],
    cookies: Annotated[BrowserCookies | None, Depends(browser_cookies)],
) -> JSONResponse:
    """Accept a message (202); the reply shows up in the conversation listing.

    A repeated ``id`` in the same conversation is accepted again with ``duplicate: true``
    and changes nothing. In public mode the first post of a browser sets its cookie, and a
    conversation another browser started is not found (404).
    """
    browser = cookies.browser(request, mint=True) if cookies else Browser(None)
    assert browser is not None, "a browser is made when the request has none"
    chat_id = browser.chat_id(conversation_id)
    command = parse_command(body.text)
    inbound = InboundMessage(
        platform=PLATFORM,
        chat_id=chat_id,
        chat_type="private",
        message_id=message_key(chat_id, body.id or uuid.uuid4().hex),
        sender_id=body.user if browser.id is None else browser.id,
        sender_name=body.user,
        text=body.text,
        addressed=True,
        command=command[0] if command else None,
        command_args=command[1] if command else "",
        meta={STREAM_META_KEY: True} if body.stream else {},
    )
    accepted = await run_in_threadpool(runtime.intake.accept, inbound)
    if accepted is None:
        # The only reason intake ignores a web chat message: the bot's allowlists.
        return JSONResponse(
            {"error": "this sender or conversation is not on the bot's allowlist"},
            status_code=403,
        )
    if not accepted.duplicate:
        # The conversation's other open pages (tabs, devices) show it now, not at the reply.
        feed: Feed = request.app.state.webchat_feed
        await run_in_threadpool(feed.publish, chat_id, message_event(accepted.message_id))
    result = Accepted(
        id=str(accepted.message_id), conversation_id=conversation_id, duplicate=accepted.duplicate
    )
    response = JSONResponse(result.model_dump(), status_code=202)
    if cookies is not None and browser.fresh:
        cookies.set_cookie(response, request, browser)
    return response


def _line(message: Message, reply_to: int | None) -> ChatLine:
    text = message.content or ""
    reply = message.role == "assistant" and message.kind == MessageKind.CHAT
    return ChatLine(
        id=str(message.id),
        role=message.role,
        text=text,
        created_at=message.created_at,
        kind=message.kind,
        user=message.speaker_name,
        html=to_html(text) if reply else None,
        reply_to=str(reply_to) if reply_to is not None else None,
    )


@dataclass(frozen=True, slots=True)
class ChatAddress:
    """Where a browser's conversation is stored."""

    chat_id: str
    """The stored chat id (also the conversation's key in the live feed)."""
    key: str
    """The session key of the conversation."""


def chat_address(
    request: Request, runtime: Runtime, cookies: BrowserCookies | None, conversation_id: str
) -> ChatAddress:
    """The conversation this browser may read.

    Raises:
        UnknownConversation: (public mode) the browser has no valid cookie (404).
    """
    browser = cookies.browser(request, mint=False) if cookies else Browser(None)
    if browser is None:
        raise UnknownConversation(conversation_id)
    chat_id = browser.chat_id(conversation_id)
    key = ConversationKey(
        tenant_id=DEFAULT_TENANT_ID,
        bot_id=_webchat_bot_id(runtime),
        platform=PLATFORM,
        chat_id=chat_id,
    ).key
    return ChatAddress(chat_id=chat_id, key=key)


def read_conversation(
    runtime: Runtime, key: str, *, limit: int, after_id: int | None = None
) -> tuple[list[ChatLine], bool] | None:
    """The conversation's lines (after ``after_id``) and whether a reply is being written.

    ``None`` when nothing was ever said in it.
    """
    with transaction(runtime.factory, durable=False) as db:
        repo = SessionRepository.from_session(db)
        sessions = repo.list_by_key(key)
        if not sessions:
            return None
        session_ids = [s.id for s in sessions]
        messages = repo.conversation(session_ids, limit=limit, after_id=after_id)
        triggers = repo.triggers_of(messages)
        pending = repo.awaits_reply(session_ids)
        lines = [_line(m, triggers.get(m.id)) for m in messages]
    return lines, pending


@router.get("/api/webchat/{conversation_id}/messages", responses=documented(404, 422, 503))
def list_messages(
    conversation_id: ConversationId,
    request: Request,
    runtime: Annotated[Runtime, Depends(get_runtime)],
    cookies: Annotated[BrowserCookies | None, Depends(browser_cookies)],
    limit: Annotated[int, Query(ge=1, le=MAX_LIST_LIMIT)] = DEFAULT_LIST_LIMIT,
) -> ConversationView:
    """The conversation across its sessions (``/new`` keeps the old ones), oldest first.

    Raises:
        UnknownConversation: nothing was ever said in it, or (public mode) this browser
            did not start it (404).
    """
    address = chat_address(request, runtime, cookies, conversation_id)
    found = read_conversation(runtime, address.key, limit=limit)
    if found is None:
        raise UnknownConversation(conversation_id)
    lines, pending = found
    return ConversationView(conversation_id=conversation_id, messages=lines, pending=pending)
