"""The process-wide pool of MCP connections, run on one background event loop thread.

The turn loop is synchronous and runs on worker threads; the MCP SDK is async. The pool
owns one daemon thread with an asyncio loop, and every connection lives there: each is a
long-lived task that enters the SDK's ``Client`` (so its cancel scopes open and close in
one task) and waits until it is closed. Servers start lazily on first use and are reused
across turns. Before each call a read-only probe (``tools/list``: protocol 2026-07-28 has
no ping) checks the connection; a dead one (the process was killed, the HTTP session
expired) is replaced before the call is sent, so a call is never sent twice. A call that
fails in flight is reported to the model, not retried. A server that cannot start is not
tried again for :data:`RETRY_AFTER_FAILURE_SECONDS`; meanwhile its last known tools stay
listed and calls to them return an error.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import threading
import time
from collections.abc import Coroutine, Sequence
from contextlib import AsyncExitStack, suppress
from typing import Any, TypeVar

from agent_core.config import DEFAULT_MCP_CALL_TIMEOUT_SECONDS, DEFAULT_MCP_START_TIMEOUT_SECONDS
from agent_core.tools.base import ToolOutput
from agent_core.tools.mcp.spec import McpServerSpec
from agent_core.tools.mcp.tools import McpToolInfo

log = logging.getLogger(__name__)

T = TypeVar("T")
Key = tuple[str, str, str]

RETRY_AFTER_FAILURE_SECONDS = 10.0
PROBE_TIMEOUT_SECONDS = 5.0
CLOSE_TIMEOUT_SECONDS = 10.0
MAX_TOOL_PAGES = 20
SYNC_MARGIN_SECONDS = 5.0
"""Extra wait of a calling thread beyond the pool's own timeouts, so those fire first."""
HTTP_CONNECT_TIMEOUT_SECONDS = 30.0
HTTP_STREAM_READ_TIMEOUT_SECONDS = 300.0


class McpUnavailable(Exception):
    """A server could not be reached or started; the message is safe to show."""


class _StderrRelay:
    """A stdio server's stderr, logged line by line at DEBUG (never mixed into our JSON logs)."""

    def __init__(self, server: str) -> None:
        read_fd, write_fd = os.pipe()
        self.file = os.fdopen(write_fd, "w")
        self._thread = threading.Thread(
            target=self._pump, args=(read_fd, server), name=f"mcp-stderr-{server}", daemon=True
        )
        self._thread.start()

    @staticmethod
    def _pump(read_fd: int, server: str) -> None:
        with os.fdopen(read_fd, "r", errors="replace") as stream:
            for line in stream:
                log.debug(
                    "mcp server stderr", extra={"server": server, "line": line.rstrip()[:300]}
                )

    def close(self) -> None:
        self.file.close()


class _Connection:
    """One live client of one server, owned by a task on the pool's loop."""

    def __init__(self, spec: McpServerSpec) -> None:
        self.spec = spec
        self.client: Any = None
        self.tools: list[McpToolInfo] | None = None
        self.broken = False
        self._ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def start(self, within: float) -> None:
        """Connect and hand-shake within ``within`` seconds.

        Raises:
            McpUnavailable: the server did not start or did not speak MCP in time.
        """
        self._task = asyncio.create_task(self._serve(), name=f"mcp-{self.spec.name}")
        try:
            await asyncio.wait_for(asyncio.shield(self._ready), within)
        except TimeoutError as exc:
            await self.close()
            raise McpUnavailable(f"it did not start within {within:g} s") from exc
        except McpUnavailable:
            await self.close()
            raise

    async def _serve(self) -> None:
        relay = _StderrRelay(self.spec.name) if self.spec.transport == "stdio" else None
        try:
            async with AsyncExitStack() as stack:
                self.client = await stack.enter_async_context(
                    await _client(self.spec, stack, relay)
                )
                self._ready.set_result(None)
                await self._stop.wait()
        except asyncio.CancelledError:
            raise
        except BaseException as exc:  # the SDK raises exception groups from its task groups
            if not self._ready.done():
                self._ready.set_exception(McpUnavailable(_describe(exc)))
            else:
                log.info(
                    "mcp connection ended",
                    extra={"server": self.spec.name, "error": type(exc).__name__},
                )
        finally:
            self.broken = True
            if not self._ready.done():
                self._ready.set_exception(McpUnavailable("the connection was closed"))
            if relay is not None:
                relay.close()

    async def close(self) -> None:
        """Leave the client (ending a stdio server's process); bounded in time."""
        self.broken = True
        self._stop.set()
        task = self._task
        if task is None or task.done():
            return
        if not self._ready.done():
            task.cancel()
        try:
            await asyncio.wait_for(asyncio.shield(task), CLOSE_TIMEOUT_SECONDS)
        except (TimeoutError, asyncio.CancelledError):
            task.cancel()
        except BaseException as exc:
            log.debug(
                "mcp close failed", extra={"server": self.spec.name, "error": type(exc).__name__}
            )


async def _client(spec: McpServerSpec, stack: AsyncExitStack, relay: _StderrRelay | None) -> Any:
    """The SDK client for ``spec`` (imported here: the SDK is only loaded when used)."""
    from mcp import Client, StdioServerParameters
    from mcp.client.stdio import get_default_environment, stdio_client
    from mcp.client.streamable_http import streamable_http_client

    if spec.transport == "stdio":
        assert spec.command is not None
        assert relay is not None
        params = StdioServerParameters(
            command=spec.command,
            args=list(spec.args),
            env={**get_default_environment(), **dict(spec.env)},
        )
        return Client(stdio_client(params, errlog=relay.file))
    import httpx2

    assert spec.url is not None
    http = await stack.enter_async_context(
        httpx2.AsyncClient(
            headers=dict(spec.headers),
            timeout=httpx2.Timeout(
                HTTP_CONNECT_TIMEOUT_SECONDS, read=HTTP_STREAM_READ_TIMEOUT_SECONDS
            ),
        )
    )
    return Client(streamable_http_client(spec.url, http_client=http))


def _describe(exc: BaseException) -> str:
    """A short reason without secrets (no arguments, headers or environment)."""
    if isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        return _describe(exc.exceptions[0])
    if isinstance(exc, FileNotFoundError):
        return "its command was not found"
    if isinstance(exc, McpUnavailable):
        return str(exc)
    return f"it failed to start ({type(exc).__name__})"


def _infos(page: Any) -> list[McpToolInfo]:
    """The tools of one ``tools/list`` page."""
    return [
        McpToolInfo(
            t.name,
            t.description or "",
            dict(t.input_schema or {}),
            repeatable=bool(
                t.annotations and (t.annotations.read_only_hint or t.annotations.idempotent_hint)
            ),
        )
        for t in page.tools
    ]


def _content_text(result: Any) -> str:
    """The text of a ``CallToolResult`` as the model reads it."""
    parts: list[str] = []
    for block in result.content or []:
        kind = getattr(block, "type", "")
        if kind == "text":
            parts.append(block.text)
        elif kind == "resource":
            resource = block.resource
            text = getattr(resource, "text", None)
            parts.append(text if text is not None else f"[binary resource {resource.uri}]")
        elif kind == "resource_link":
            parts.append(f"[resource {block.uri}]")
        else:
            parts.append(f"[{kind} content: {getattr(block, 'mime_type', 'unknown type')}]")
    if not parts and result.structured_content is not None:
        parts.append(json.dumps(result.structured_content, ensure_ascii=False, default=str))
    return "\n".join(parts)


class McpPool:
    """MCP connections shared by all turns of a process.

    Args:
        call_timeout: seconds per tool call when a server sets none.
        start_timeout: seconds a server has to start and hand-shake.
    """

    def __init__(
        self,
        *,
        call_timeout: float = DEFAULT_MCP_CALL_TIMEOUT_SECONDS,
        start_timeout: float = DEFAULT_MCP_START_TIMEOUT_SECONDS,
    ) -> None:
        self._call_timeout = call_timeout
        self._start_timeout = start_timeout
        self._thread_lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        # Changed only on the pool's loop (``_connections`` is read by :meth:`_listed`):
        self._connections: dict[Key, _Connection] = {}
        self._starting: dict[Key, asyncio.Lock] = {}
        self._known_tools: dict[Key, list[McpToolInfo]] = {}
        self._failed: dict[Key, tuple[float, str]] = {}

    # -- the loop thread ----------------------------------------------------------------

    def _loop_running(self) -> asyncio.AbstractEventLoop:
        with self._thread_lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                thread = threading.Thread(target=loop.run_forever, name="mcp-pool", daemon=True)
                thread.start()
                self._loop, self._thread = loop, thread
            return self._loop

    def _run(self, coro: Coroutine[Any, Any, T], timeout: float) -> T:
        future = asyncio.run_coroutine_threadsafe(coro, self._loop_running())
        try:
            return future.result(timeout + SYNC_MARGIN_SECONDS)
        except TimeoutError:
            future.cancel()
            raise

    def close(self) -> None:
        """Stop every server and the loop thread; the pool starts afresh if used again."""
        with self._thread_lock:
            loop, thread = self._loop, self._thread
            self._loop = self._thread = None
        if loop is None or thread is None:
            return
        with suppress(Exception):
            asyncio.run_coroutine_threadsafe(self._close_all(), loop).result(
                CLOSE_TIMEOUT_SECONDS + SYNC_MARGIN_SECONDS
            )
        loop.call_soon_threadsafe(loop.stop)
        thread.join(CLOSE_TIMEOUT_SECONDS)
        if not thread.is_alive():
            loop.close()

    async def _close_all(self) -> None:
        connections = list(self._connections.values())
        self._connections.clear()
        await asyncio.gather(*(c.close() for c in connections), return_exceptions=True)

    # -- connections ----------------------------------------------------------------------

    async def _connected(self, spec: McpServerSpec, *, check: bool) -> _Connection:
        key = spec.key
        lock = self._starting.setdefault(key, asyncio.Lock())
        async with lock:
            conn = self._connections.get(key)
            if conn is not None and not conn.broken and check:
                try:
                    page = await asyncio.wait_for(
                        conn.client.list_tools(cache_mode="refresh"), PROBE_TIMEOUT_SECONDS
                    )
                    if page.next_cursor is None:  # the whole list: keep the catalogue live
                        conn.tools = self._known_tools[key] = _infos(page)
                except Exception:
                    log.info("mcp server gone, restarting", extra={"server": spec.name})
                    conn.broken = True
            if conn is not None and not conn.broken:
                return conn
            if conn is not None:
                self._connections.pop(key, None)
                await conn.close()
            failed = self._failed.get(key)
            if failed is not None and time.monotonic() < failed[0]:
                raise McpUnavailable(failed[1])
            conn = _Connection(spec)
            try:
                await conn.start(self._start_timeout)
            except McpUnavailable as exc:
                self._failed[key] = (time.monotonic() + RETRY_AFTER_FAILURE_SECONDS, str(exc))
                log.warning(
                    "mcp server did not start",
                    extra={"server": spec.name, "transport": spec.transport, "reason": str(exc)},
                )
                raise
            self._failed.pop(key, None)
            self._connections[key] = conn
            return conn

    async def _list(self, spec: McpServerSpec) -> list[McpToolInfo]:
        try:
            conn = await self._connected(spec, check=False)
            if conn.tools is None:
                tools: list[McpToolInfo] = []
                cursor = None
                for _ in range(MAX_TOOL_PAGES):
                    page = await asyncio.wait_for(
                        conn.client.list_tools(cursor=cursor), self._timeout(spec)
                    )
                    tools += _infos(page)
                    cursor = page.next_cursor
                    if cursor is None:
                        break
                conn.tools = tools
                self._known_tools[spec.key] = tools
            return conn.tools
        except Exception as exc:
            log.warning(
                "mcp tools unavailable", extra={"server": spec.name, "error": type(exc).__name__}
            )
            return self._known_tools.get(spec.key, [])

    def _timeout(self, spec: McpServerSpec) -> float:
        return spec.timeout or self._call_timeout

    # -- the synchronous API (McpToolSource) ---------------------------------------------

    def list_tools(
        self, servers: Sequence[McpServerSpec]
    ) -> dict[McpServerSpec, list[McpToolInfo]]:
        """Each server's tools, listed concurrently; a server that is down keeps its last list.

        When every server is connected with its list known, the lists are answered on the
        calling thread: a hop to the pool's loop waits for the GIL behind busy threads
        (milliseconds a turn), and the loop would only hand back the same lists.
        """
        if not servers:
            return {}
        known = self._listed(servers)
        if known is not None:
            return known

        async def gather() -> list[list[McpToolInfo]]:
            return list(await asyncio.gather(*(self._list(spec) for spec in servers)))

        budget = (
            self._start_timeout + max(self._timeout(s) for s in servers) + PROBE_TIMEOUT_SECONDS
        )
        try:
            lists = self._run(gather(), budget)
        except TimeoutError:
            log.warning("mcp tool listing timed out")
            return {}
        return dict(zip(servers, lists, strict=True))

    def _listed(
        self, servers: Sequence[McpServerSpec]
    ) -> dict[McpServerSpec, list[McpToolInfo]] | None:
        """The live connections' known lists, or ``None`` when one must be asked for."""
        listed: dict[McpServerSpec, list[McpToolInfo]] = {}
        for spec in servers:
            conn = self._connections.get(spec.key)
            tools = None if conn is None or conn.broken else conn.tools
            if tools is None:
                return None
            listed[spec] = tools
        return listed

    def call_tool(self, server: McpServerSpec, tool: str, arguments: dict[str, Any]) -> ToolOutput:
        """Run one tool within the server's timeout; every failure is an error output."""
        timeout = self._timeout(server)
        budget = self._start_timeout + timeout + PROBE_TIMEOUT_SECONDS
        try:
            return self._run(self._call(server, tool, arguments, timeout), budget)
        except TimeoutError:
            return ToolOutput(
                f"The {server.name} tool server did not answer within {timeout:g} s.", is_error=True
            )

    async def _call(
        self, spec: McpServerSpec, tool: str, arguments: dict[str, Any], seconds: float
    ) -> ToolOutput:
        from mcp import MCPError
        from mcp_types import CONNECTION_CLOSED, REQUEST_TIMEOUT

        try:
            conn = await self._connected(spec, check=True)
        except McpUnavailable as exc:
            return ToolOutput(f"The {spec.name} tool server is unavailable: {exc}.", is_error=True)
        try:
            result = await conn.client.call_tool(tool, arguments, read_timeout_seconds=seconds)
        except MCPError as exc:
            if exc.code == REQUEST_TIMEOUT:
                return ToolOutput(
                    f"{tool} on the {spec.name} server did not answer within {seconds:g} s.",
                    is_error=True,
                )
            if exc.code == CONNECTION_CLOSED:
                conn.broken = True
                return ToolOutput(
                    f"The {spec.name} tool server went away during the call; it is restarted on "
                    "the next call. The call may or may not have taken effect.",
                    is_error=True,
                )
            return ToolOutput(
                f"The {spec.name} server refused {tool}: {exc.message}", is_error=True
            )
        except Exception as exc:
            conn.broken = True
            log.warning("mcp call failed", extra={"server": spec.name, "error": type(exc).__name__})
            return ToolOutput(
                f"The call to {tool} on the {spec.name} server failed ({type(exc).__name__}); "
                "it may or may not have taken effect.",
                is_error=True,
            )
        return ToolOutput(_content_text(result), is_error=bool(result.is_error))
