"""The admin API, ``/api/admin/v1``: tenants, settings, bots, sessions, memory, keys, audit.

Every route authenticates with ``Authorization: Bearer hbk_…`` through one dependency that
also scopes the request: no or a bad key is 401, a tenant the key does not reach is 404
(as if it did not exist), and a read key on a write is 403. Every write is audited.
Endpoints are plain functions, which FastAPI runs in its thread pool: the database calls
are blocking.
"""

from __future__ import annotations

import difflib
import logging
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Depends, FastAPI, Path, Query, Request, Response
from fastapi.responses import JSONResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import AfterValidator, BaseModel, ConfigDict, Field
from sqlalchemy.orm import Session

from agent_core.admin import audit, keys, operations
from agent_core.admin.repository import AdminRepository
from agent_core.busy import BUSY_MODES
from agent_core.compaction.repository import CompactionRepository
from agent_core.crypto import CredentialBox, load_or_create_key
from agent_core.db.base import utcnow
from agent_core.db.engine import read_transaction, transaction
from agent_core.db.models import Bot, ChatSession, Compaction, Message, Tenant
from agent_core.errors import ConfigError, InvalidInput
from agent_core.tenancy.service import PLATFORMS, TRIGGER_MODES, add_bot
from agent_core.tenancy.settings import (
    TenantDefaults,
    check_busy_mode,
    check_tool_patterns,
    check_trigger_mode,
)
from agent_core.tools.mcp.tenants import server_transports
from gateway.dependencies import get_runtime
from gateway.errors import documented
from workers.runtime import Runtime

log = logging.getLogger(__name__)

PREFIX = "/api/admin/v1"
WRITE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
DEFAULT_LIMIT = 200
MAX_LIMIT = 1000

bearer = HTTPBearer(auto_error=False, description="An admin API key: hbk_…")
# Every admin route checks the key (401), its scope (403) and the tenant (404), validates its
# input (422) and reads the database (503 while it is down).
router = APIRouter(prefix=PREFIX, tags=["admin"], responses=documented(401, 403, 404, 422, 503))

Limit = Annotated[int, Query(ge=1, le=MAX_LIMIT)]
TenantId = Annotated[str, Path(max_length=64)]
SessionId = Annotated[str, Path(max_length=32)]


class AdminError(Exception):
    """An admin request refused with ``status`` and a message."""

    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.headers = headers


def _unauthorized(message: str) -> AdminError:
    return AdminError(401, message, {"WWW-Authenticate": "Bearer"})


def _not_found(what: str) -> AdminError:
    return AdminError(404, f"no such {what}")


@dataclass(frozen=True)
class Access:
    """A verified caller, and the tenant of the request when its path names one."""

    caller: keys.Caller
    tenant_id: str
    runtime: Runtime

    @property
    def actor(self) -> str:
        """How the audit log names the caller."""
        return self.caller.prefix


def authenticate(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
    runtime: Annotated[Runtime, Depends(get_runtime)],
) -> keys.Caller:
    """The caller behind the bearer key; refuses writes with a read key."""
    if credentials is None or credentials.scheme.lower() != "bearer":
        raise _unauthorized("an admin API key is required: Authorization: Bearer hbk_…")
    with read_transaction(runtime.factory) as db:
        found = keys.identify(db, credentials.credentials)
    if found is None:
        log.warning(
            "admin request refused: unknown or revoked key", extra={"path": request.url.path}
        )
        raise _unauthorized("unknown or revoked API key")
    caller, last_used_at = found
    now = utcnow()
    if keys.is_stale(last_used_at, now):
        # Bookkeeping only: a use lost in a database crash is harmless.
        with transaction(runtime.factory, durable=False) as db:
            keys.touch(db, caller.prefix, now)
    if request.method in WRITE_METHODS and caller.scope is keys.Scope.READ:
        raise AdminError(403, "this key is read-only")
    return caller


def tenant_access(
    tenant: TenantId,
    caller: Annotated[keys.Caller, Depends(authenticate)],
    runtime: Annotated[Runtime, Depends(get_runtime)],
) -> Access:
    """The caller on a tenant it reaches; another tenant's id is 404, like a missing one."""
    if not caller.reaches(tenant):
        raise _not_found("tenant")
    with read_transaction(runtime.factory) as db:
        if db.get(Tenant, tenant) is None:
            raise _not_found("tenant")
    return Access(caller=caller, tenant_id=tenant, runtime=runtime)


TenantAccess = Annotated[Access, Depends(tenant_access)]


def install(app: FastAPI, *, responses: dict[int | str, dict[str, Any]] | None = None) -> None:
    """Mount the admin API on ``app`` with its error answers (``{"error": …}``).

    Args:
        app: the gateway's app.
        responses: answers every route of the app may give, documented on these too.
    """

    @app.exception_handler(AdminError)
    async def _refused(_: Request, exc: AdminError) -> JSONResponse:
        return JSONResponse({"error": str(exc)}, status_code=exc.status, headers=exc.headers)

    app.include_router(router, responses=responses)


# --- schemas ----------------------------------------------------------------------------


class Strict(BaseModel):
    """Request bodies: an unknown field is a mistake, answered 422."""

    model_config = ConfigDict(extra="forbid")


class TenantOut(BaseModel):
    """A tenant."""

    id: str
    name: str
    created_at: datetime


def _valid_trigger_mode(value: str | None) -> str | None:
    try:
        check_trigger_mode(value)
    except InvalidInput as exc:
        raise ValueError(str(exc)) from None
    return value


def _valid_busy_mode(value: str | None) -> str | None:
    try:
        check_busy_mode(value)
    except InvalidInput as exc:
        raise ValueError(str(exc)) from None
    return value


def _valid_tools(value: list[str] | None) -> list[str] | None:
    try:
        check_tool_patterns(value)
    except InvalidInput as exc:
        raise ValueError(str(exc)) from None
    return value


TriggerModeField = Annotated[str | None, AfterValidator(_valid_trigger_mode)]
ToolsField = Annotated[list[str] | None, AfterValidator(_valid_tools)]
BusyModeField = Annotated[str | None, AfterValidator(_valid_busy_mode)]
BUSY_MODE_HELP = f"one of {', '.join(BUSY_MODES)}: what messages arriving during a turn do"


class TenantSettings(Strict):
    """What a tenant stores; persona and instructions are read by the tenant's next turn.

    The bot defaults apply to each of its bots that has no value of its own: at once in
    the process that took the change, within ``HUBBUB_SETTINGS_REFRESH_SECONDS`` in the
    others. The compression thresholds are used by every compaction decision of its
    sessions from their next turn or check.
    """

    name: str = Field(min_length=1, max_length=200)
    persona: str | None = Field(
        None, max_length=20_000, description="replaces the default identity in the prompt"
    )
    instructions: str | None = Field(
        None, max_length=20_000, description="added to the operator's instructions in the prompt"
    )
    trigger_mode: TriggerModeField = Field(
        None, description=f"default for bots: one of {', '.join(TRIGGER_MODES)}"
    )
    busy_mode: BusyModeField = Field(None, description=f"default for bots: {BUSY_MODE_HELP}")
    allow_users: list[str] | None = Field(None, max_length=1000, description="default for bots")
    allow_chats: list[str] | None = Field(None, max_length=1000, description="default for bots")
    tools: ToolsField = Field(
        None, max_length=200, description="default tool allow-list for bots (fnmatch patterns)"
    )
    # -- compression thresholds (hosted) --
    compression_threshold: float | None = Field(
        None,
        gt=0,
        lt=1,
        description="share of the usable window where its sessions are compacted; "
        "null: the deployment's (HUBBUB_COMPRESSION_THRESHOLD)",
    )
    hygiene_threshold: float | None = Field(
        None,
        gt=0,
        lt=1,
        description="share where the pre-agent safety net compacts, not below "
        "compression_threshold; null: the deployment's (HUBBUB_COMPRESSION_HYGIENE_THRESHOLD)",
    )
    # -- models (hosted) --
    models: list[Annotated[str, Field(min_length=1, max_length=200)]] | None = Field(
        None,
        max_length=100,
        description="models its sessions may use (/model), from the deployment's "
        "HUBBUB_MODELS; null: all of those",
    )
    default_model: str | None = Field(
        None,
        max_length=200,
        description="the model a session starts on, one of models; null: HUBBUB_MODEL",
    )


class McpServerOut(BaseModel):
    """One of the tenant's MCP servers (``hubbub tenants mcp``): no target, no secret."""

    name: str
    transport: str = Field(description="stdio or http")


class TenantSettingsOut(TenantSettings):
    """The settings with what is managed elsewhere, read-only (not accepted by ``PUT``)."""

    mcp_servers: list[McpServerOut]


class Credentials(Strict):
    """Platform credentials: written, rotated, never read back."""

    token: str = Field(min_length=1, max_length=4096)
    webhook_secret: str | None = Field(None, max_length=4096)
    signing_secret: str | None = Field(None, max_length=4096)
    app_token: str | None = Field(None, max_length=4096)


class BotOptions(Strict):
    """A bot's behaviour (every field optional on update)."""

    trigger_mode: TriggerModeField = Field(None, description=f"one of {', '.join(TRIGGER_MODES)}")
    busy_mode: BusyModeField = Field(None, description=BUSY_MODE_HELP)
    answer_bots: bool | None = None
    allow_users: list[str] | None = Field(None, max_length=1000)
    allow_chats: list[str] | None = Field(None, max_length=1000)
    tools: ToolsField = Field(None, max_length=200)
    api_base: str | None = Field(None, max_length=2048)
    mode: str | None = Field(None, description="telegram: auto, webhook or polling")


class NewBot(BotOptions):
    """A bot to create."""

    platform: str = Field(description=f"one of {', '.join(PLATFORMS)}")
    name: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_-]+$")
    credentials: Credentials


class BotUpdate(BotOptions):
    """Changes to a bot; ``credentials`` replaces (rotates) all of them."""

    credentials: Credentials | None = None


class BotOut(BaseModel):
    """A bot as the API shows it: whether it has credentials, never what they are."""

    id: int
    platform: str
    name: str
    trigger_mode: str | None = Field(description="the bot's own; null inherits the tenant's")
    busy_mode: str | None = Field(description="the bot's own; null inherits the tenant's")
    answer_bots: bool
    allow_users: list[str]
    allow_chats: list[str]
    tools: list[str]
    api_base: str | None
    mode: str | None
    has_credentials: bool


class SessionOut(BaseModel):
    """A session with its size."""

    id: str
    bot_id: int
    platform: str
    chat_id: str
    thread_id: str
    chat_type: str
    is_current: bool
    created_at: datetime
    last_message_at: datetime | None
    active_messages: int
    active_tokens: int
    compaction_count: int


class Gauge(BaseModel):
    """How full the session's context is against the deployment's compaction lines."""

    stored_tokens: int
    last_prompt_tokens: int
    model: str | None = Field(None, description="the session's model (/model), whose window it is")
    window: int | None
    threshold: int | None
    hygiene: int | None
    message_limit: int | None
    fraction_of_window: float | None
    compaction_count: int


class SessionDetail(SessionOut):
    """A session with its gauge and state."""

    gauge: Gauge
    ended_at: datetime | None
    has_summary: bool
    prompt_built_at: datetime | None


class MessageOut(BaseModel):
    """One stored message."""

    id: int
    seq: int
    role: str
    kind: str
    speaker_id: str | None
    speaker_name: str | None
    content: str | None
    tool_calls: list[dict[str, Any]] | None
    token_count: int
    archived: bool
    deleted: bool
    created_at: datetime


class CompactionOut(BaseModel):
    """One compaction, with its summary and the diff to the summary it replaced."""

    id: int
    created_at: datetime
    trigger: str
    strategy: str
    tokens_before: int
    tokens_after: int
    archived_count: int
    restored: bool
    summary: str
    summary_diff: str


class MemoryOut(BaseModel):
    """One memory entry."""

    id: int
    bot_id: int | None
    scope: str
    subject: str | None
    chat_key: str | None
    content: str
    created_at: datetime


class KeyOut(BaseModel):
    """A key as listed: never the secret."""

    prefix: str
    tenant: str | None
    scope: str
    created_at: str | None
    last_used_at: str | None
    revoked_at: str | None


class NewKey(Strict):
    """A key to create for the tenant."""

    scope: keys.Scope = keys.Scope.READ


class CreatedKeyOut(KeyOut):
    """A new key: ``key`` is shown this once."""

    key: str


class AuditOut(BaseModel):
    """One audited change."""

    id: int
    at: datetime
    actor: str
    action: str
    target: str
    before: dict[str, Any] | None
    after: dict[str, Any] | None


class Restored(BaseModel):
    """What ``restore`` undid (``compaction_id`` is null when there was nothing)."""

    compaction_id: int | None
    messages_back: int


class NewSession(BaseModel):
    """The chat's fresh current session, and the one it replaced (kept, transcript and all)."""

    session_id: str
    previous_session_id: str


# --- helpers ----------------------------------------------------------------------------


def _tenant_out(tenant: Tenant) -> TenantOut:
    return TenantOut(id=tenant.id, name=tenant.name, created_at=tenant.created_at)


def bot_out(bot: Bot) -> BotOut:
    """A bot as the API and the console show it."""
    options = bot.settings or {}
    return BotOut(
        id=bot.id,
        platform=bot.platform,
        name=bot.name,
        trigger_mode=bot.trigger_mode,
        busy_mode=bot.busy_mode,
        answer_bots=bot.answer_bots,
        allow_users=list(options.get("allow_users", [])),
        allow_chats=list(options.get("allow_chats", [])),
        tools=list(options.get("tools", [])),
        api_base=options.get("api_base"),
        mode=options.get("mode"),
        has_credentials=bot.credentials is not None,
    )


def session_fields(s: ChatSession) -> dict[str, Any]:
    """The fields of :class:`SessionOut`."""
    return {
        "id": s.id,
        "bot_id": s.bot_id,
        "platform": s.platform,
        "chat_id": s.chat_id,
        "thread_id": s.thread_id,
        "chat_type": s.chat_type,
        "is_current": s.is_current,
        "created_at": s.created_at,
        "last_message_at": s.last_message_at,
        "active_messages": s.active_count,
        "active_tokens": s.active_tokens,
        "compaction_count": s.compaction_count,
    }


def _message_out(m: Message) -> MessageOut:
    return MessageOut(
        id=m.id,
        seq=m.seq,
        role=m.role,
        kind=m.kind,
        speaker_id=m.speaker_id,
        speaker_name=m.speaker_name,
        content=m.content,
        tool_calls=m.tool_calls,
        token_count=m.token_count,
        archived=m.archived,
        deleted=m.deleted,
        created_at=m.created_at,
    )


def compaction_out(c: Compaction) -> CompactionOut:
    """A compaction with the diff of its summary to the one it replaced."""
    diff = difflib.unified_diff(
        (c.previous_summary or "").splitlines(),
        c.summary.splitlines(),
        "previous",
        "summary",
        lineterm="",
    )
    return CompactionOut(
        id=c.id,
        created_at=c.created_at,
        trigger=c.trigger,
        strategy=c.strategy,
        tokens_before=c.tokens_before,
        tokens_after=c.tokens_after,
        archived_count=c.archived_count,
        restored=c.restored,
        summary=c.summary,
        summary_diff="\n".join(diff),
    )


def session_gauge(runtime: Runtime, db: Session, s: ChatSession) -> Gauge:
    """How full ``s`` is, against its model's window and its tenant's compaction lines."""
    tenant = db.get(Tenant, s.tenant_id)
    model = runtime.models.choice(
        TenantDefaults.from_json(tenant.settings if tenant else None)
    ).pick(s.model)
    window: int | None = None
    try:
        window = runtime.models.main(model).context_length
    except ConfigError:
        window = None
    compactor = runtime.compactor
    lines = compactor.lines(compactor.settings_for(db, s.tenant_id), model)
    return Gauge(
        stored_tokens=s.active_tokens,
        last_prompt_tokens=s.last_prompt_tokens,
        model=model,
        window=window,
        threshold=lines.threshold if lines else None,
        hygiene=lines.hygiene if lines else None,
        message_limit=lines.message_limit if lines else None,
        fraction_of_window=round(s.active_tokens / window, 4) if window else None,
        compaction_count=s.compaction_count,
    )


def _box(runtime: Runtime) -> CredentialBox:
    settings = runtime.settings
    secret = settings.secret_key.get_secret_value() if settings.secret_key else None
    return CredentialBox(load_or_create_key(secret, settings.home))


def _options(body: BotOptions) -> dict[str, Any]:
    fields = ("allow_users", "allow_chats", "tools", "api_base", "mode")
    return {f: getattr(body, f) for f in fields if f in body.model_fields_set}


def _secrets(credentials: Credentials) -> dict[str, str]:
    return {k: v for k, v in credentials.model_dump().items() if v}


def _bot_or_404(db: Session, access: Access, bot_id: int) -> Bot:
    bot = AdminRepository.from_session(db).bot(access.tenant_id, bot_id)
    if bot is None:
        raise _not_found("bot")
    return bot


def _session_or_404(db: Session, access: Access, session_id: str) -> ChatSession:
    found = AdminRepository.from_session(db).session_of(access.tenant_id, session_id)
    if found is None:
        raise _not_found("session")
    return found


def _record(db: Session, access: Access, action: str, target: str, **values: Any) -> None:
    audit.record(
        db, tenant_id=access.tenant_id, actor=access.actor, action=action, target=target, **values
    )


# --- tenants and settings -----------------------------------------------------------------


@router.get("/tenants")
def list_tenants(
    caller: Annotated[keys.Caller, Depends(authenticate)],
    runtime: Annotated[Runtime, Depends(get_runtime)],
) -> list[TenantOut]:
    """Every tenant for the operator; a tenant key sees its own."""
    with read_transaction(runtime.factory) as db:
        return [_tenant_out(t) for t in AdminRepository.from_session(db).tenants(caller.tenant_id)]


def _settings_out(db: Session, tenant: Tenant) -> TenantSettingsOut:
    servers = [McpServerOut(name=n, transport=t) for n, t in server_transports(db, tenant.id)]
    return TenantSettingsOut(**operations.describe_settings(tenant), mcp_servers=servers)


@router.get("/tenants/{tenant}/settings")
def get_settings(access: TenantAccess) -> TenantSettingsOut:
    """The tenant's stored settings, with its MCP servers."""
    with read_transaction(access.runtime.factory) as db:
        tenant = db.get(Tenant, access.tenant_id)
        assert tenant is not None
        return _settings_out(db, tenant)


@router.put("/tenants/{tenant}/settings")
def put_settings(access: TenantAccess, body: TenantSettings) -> TenantSettingsOut:
    """Replace the tenant's settings; the next turn of each of its sessions uses them."""
    change = operations.TenantSettingsChange(
        name=body.name,
        persona=body.persona,
        stored=TenantDefaults(
            instructions=body.instructions or None,
            trigger_mode=body.trigger_mode,
            busy_mode=body.busy_mode,
            allow_users=tuple(body.allow_users) if body.allow_users else None,
            allow_chats=tuple(body.allow_chats) if body.allow_chats else None,
            tools=tuple(body.tools) if body.tools else None,
            compression_threshold=body.compression_threshold,
            hygiene_threshold=body.hygiene_threshold,
            models=tuple(body.models) if body.models else None,
            default_model=body.default_model or None,
        ),
    )
    try:
        with transaction(access.runtime.factory) as db:
            tenant = operations.update_settings(
                db,
                tenant_id=access.tenant_id,
                change=change,
                deployment=access.runtime.settings.compression,
                offered_models=access.runtime.settings.allowed_models,
                actor=access.actor,
            )
            if tenant is None:
                raise _not_found("tenant")
            out = _settings_out(db, tenant)
    except InvalidInput as exc:
        raise AdminError(422, str(exc)) from None
    access.runtime.bots.forget(access.tenant_id)
    return out


# --- bots ---------------------------------------------------------------------------------


@router.get("/tenants/{tenant}/bots")
def list_bots(access: TenantAccess) -> list[BotOut]:
    """The tenant's bots (credentials are never shown)."""
    with read_transaction(access.runtime.factory) as db:
        return [bot_out(b) for b in AdminRepository.from_session(db).bots(access.tenant_id)]


@router.post("/tenants/{tenant}/bots", status_code=201)
def create_bot(access: TenantAccess, body: NewBot) -> BotOut:
    """Add a bot with sealed credentials; the gateway starts it on its next start."""
    with transaction(access.runtime.factory) as db:
        bot = add_bot(
            db,
            _box(access.runtime),
            tenant_id=access.tenant_id,
            platform=body.platform,
            name=body.name,
            secrets=_secrets(body.credentials),
            options=_options(body),
            trigger_mode=body.trigger_mode,
            answer_bots=bool(body.answer_bots),
            busy_mode=body.busy_mode,
        )
        out = bot_out(bot)
        _record(db, access, "bot.create", f"bot:{bot.id}", after=out.model_dump())
    return out


@router.get("/tenants/{tenant}/bots/{bot}")
def get_bot(access: TenantAccess, bot: int) -> BotOut:
    """One bot."""
    with read_transaction(access.runtime.factory) as db:
        return bot_out(_bot_or_404(db, access, bot))


@router.put("/tenants/{tenant}/bots/{bot}")
def update_bot(access: TenantAccess, bot: int, body: BotUpdate) -> BotOut:
    """Change a bot's behaviour or rotate its credentials.

    Messages are judged by the new trigger mode and allowlists at once in this process and
    within ``HUBBUB_SETTINGS_REFRESH_SECONDS`` in the others; a bot's platform connection
    (a new bot, a new token or API base) starts with the gateway's next start.
    """
    with transaction(access.runtime.factory) as db:
        row = _bot_or_404(db, access, bot)
        before = bot_out(row).model_dump()
        if body.trigger_mode is not None:
            row.trigger_mode = body.trigger_mode
        if body.busy_mode is not None:
            row.busy_mode = body.busy_mode
        if body.answer_bots is not None:
            row.answer_bots = body.answer_bots
        options = {**(row.settings or {}), **_options(body)}
        row.settings = {k: v for k, v in options.items() if v not in (None, "", [])}
        rotated = body.credentials is not None
        if body.credentials is not None:
            row.credentials = _box(access.runtime).seal(_secrets(body.credentials))
        db.flush()
        out = bot_out(row)
        after = out.model_dump() | ({"credentials_rotated": True} if rotated else {})
        _record(db, access, "bot.update", f"bot:{bot}", before=before, after=after)
    access.runtime.bots.forget(access.tenant_id)
    return out


@router.delete("/tenants/{tenant}/bots/{bot}", status_code=204)
def delete_bot(access: TenantAccess, bot: int) -> Response:
    """Delete a bot with its sessions and messages."""
    with transaction(access.runtime.factory) as db:
        row = _bot_or_404(db, access, bot)
        before = bot_out(row).model_dump()
        db.delete(row)
        db.flush()
        _record(db, access, "bot.delete", f"bot:{bot}", before=before)
    access.runtime.bots.forget(access.tenant_id)
    return Response(status_code=204)


# --- sessions -----------------------------------------------------------------------------


@router.get("/tenants/{tenant}/sessions")
def list_sessions(
    access: TenantAccess,
    platform: Annotated[str | None, Query(max_length=32)] = None,
    chat: Annotated[str | None, Query(max_length=128)] = None,
    limit: Limit = DEFAULT_LIMIT,
) -> list[SessionOut]:
    """The tenant's sessions, most recently active first."""
    with read_transaction(access.runtime.factory) as db:
        found = AdminRepository.from_session(db).sessions(
            access.tenant_id, platform=platform, chat=chat, limit=limit
        )
        return [SessionOut(**session_fields(s)) for s in found]


@router.get("/tenants/{tenant}/sessions/{session_id}")
def get_session(access: TenantAccess, session_id: SessionId) -> SessionDetail:
    """A session with its context gauge and state."""
    with read_transaction(access.runtime.factory) as db:
        s = _session_or_404(db, access, session_id)
        return SessionDetail(
            **session_fields(s),
            gauge=session_gauge(access.runtime, db, s),
            ended_at=s.ended_at,
            has_summary=bool(s.summary),
            prompt_built_at=s.prompt_built_at,
        )


@router.get("/tenants/{tenant}/sessions/{session_id}/messages")
def list_messages(
    access: TenantAccess, session_id: SessionId, limit: Limit = DEFAULT_LIMIT
) -> list[MessageOut]:
    """The session's newest stored messages, archived ones included, oldest first."""
    with read_transaction(access.runtime.factory) as db:
        _session_or_404(db, access, session_id)
        found = AdminRepository.from_session(db).messages(session_id, limit=limit)
        return [_message_out(m) for m in found]


@router.get("/tenants/{tenant}/sessions/{session_id}/compactions")
def list_compactions(access: TenantAccess, session_id: SessionId) -> list[CompactionOut]:
    """Every compaction of the session, oldest first."""
    with read_transaction(access.runtime.factory) as db:
        _session_or_404(db, access, session_id)
        found = CompactionRepository.from_session(db).list_for_session(session_id)
        return [compaction_out(c) for c in found]


@router.post("/tenants/{tenant}/sessions/{session_id}/restore")
def restore_compaction(access: TenantAccess, session_id: SessionId) -> Restored:
    """Undo the session's newest compaction: its messages become active again."""
    with transaction(access.runtime.factory) as db:
        done = operations.restore_compaction(
            db, tenant_id=access.tenant_id, session_id=session_id, actor=access.actor
        )
    if done is None:
        raise _not_found("session")
    return Restored(compaction_id=done.compaction_id, messages_back=done.messages_back)


@router.post("/tenants/{tenant}/sessions/{session_id}/new", status_code=201)
def new_session(access: TenantAccess, session_id: SessionId) -> NewSession:
    """``/new`` for the session's chat: a fresh session becomes current; this one is kept."""
    with transaction(access.runtime.factory) as db:
        fresh = operations.new_session(
            db, tenant_id=access.tenant_id, session_id=session_id, actor=access.actor
        )
    if fresh is None:
        raise _not_found("session")
    return NewSession(session_id=fresh, previous_session_id=session_id)


@router.get("/tenants/{tenant}/sessions/{session_id}/archive")
def search_archive(
    access: TenantAccess,
    session_id: SessionId,
    q: Annotated[str | None, Query(max_length=500, description="text to look for")] = None,
) -> list[MessageOut]:
    """The session's archived (compacted) messages, or those containing ``q``."""
    with read_transaction(access.runtime.factory) as db:
        _session_or_404(db, access, session_id)
        repo = CompactionRepository.from_session(db)
        found = repo.search_archive(session_id, q) if q else repo.archived(session_id)
        return [_message_out(m) for m in found]


# --- memory, keys, audit ------------------------------------------------------------------


@router.get("/tenants/{tenant}/memory")
def list_memory(access: TenantAccess, limit: Limit = DEFAULT_LIMIT) -> list[MemoryOut]:
    """The tenant's memory entries, oldest first."""
    with read_transaction(access.runtime.factory) as db:
        found = AdminRepository.from_session(db).memory(access.tenant_id, limit=limit)
        return [
            MemoryOut(
                id=e.id,
                bot_id=e.bot_id,
                scope=e.scope,
                subject=e.subject,
                chat_key=e.chat_key,
                content=e.content,
                created_at=e.created_at,
            )
            for e in found
        ]


@router.get("/tenants/{tenant}/keys")
def list_keys(access: TenantAccess) -> list[KeyOut]:
    """The tenant's keys (operator keys are not the tenant's)."""
    with read_transaction(access.runtime.factory) as db:
        found = keys.KeyRepository.from_session(db).list(access.tenant_id)
        return [KeyOut.model_validate(keys.describe(k)) for k in found]


@router.post("/tenants/{tenant}/keys", status_code=201)
def create_key(access: TenantAccess, body: NewKey) -> CreatedKeyOut:
    """A new key for the tenant; its secret is in this answer only."""
    with transaction(access.runtime.factory) as db:
        created = operations.create_key(
            db, tenant_id=access.tenant_id, scope=body.scope, actor=access.actor
        )
        described = keys.describe(created.key)
    return CreatedKeyOut.model_validate(described | {"key": created.secret})


@router.delete("/tenants/{tenant}/keys/{prefix}")
def revoke_key(access: TenantAccess, prefix: Annotated[str, Path(max_length=16)]) -> KeyOut:
    """Revoke one of the tenant's keys."""
    with transaction(access.runtime.factory) as db:
        key = operations.revoke_key(
            db, tenant_id=access.tenant_id, prefix=prefix, actor=access.actor
        )
        if key is None:
            raise _not_found("key")
        after = keys.describe(key)
    return KeyOut.model_validate(after)


@router.get("/tenants/{tenant}/audit")
def list_audit(access: TenantAccess, limit: Limit = DEFAULT_LIMIT) -> list[AuditOut]:
    """The tenant's audited changes, newest first."""
    with read_transaction(access.runtime.factory) as db:
        return [
            AuditOut(
                id=e.id,
                at=e.at,
                actor=e.actor,
                action=e.action,
                target=e.target,
                before=e.before,
                after=e.after,
            )
            for e in audit.list_for_tenant(db, access.tenant_id, limit=limit)
        ]
