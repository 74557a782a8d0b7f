"""One-line digests of tool results: what was done survives pruning, the raw output does not.

A placeholder such as "[output removed]" leaves the model guessing whether a step ran; a
digest like ``[terminal] ran `npm test` -> exit 0, 47 lines output`` keeps the fact.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from typing import Any

ARGUMENT_PREVIEW_CHARS = 80
"""How much of a command, path or query a digest quotes."""

_EXIT_CODE = re.compile(r"(?i)\bexit(?:[ _]?code| status)?\s*[:=]?\s*(-?\d+)")
_JSON_EXIT_KEYS = ("exit_code", "returncode", "exitCode", "exit_status", "status_code")

Digest = Callable[[str, Mapping[str, Any], str], str]


def _preview(value: Any) -> str:
    text = " ".join(str(value).split())
    if len(text) <= ARGUMENT_PREVIEW_CHARS:
        return text
    return text[: ARGUMENT_PREVIEW_CHARS - 1] + "…"


def _parse_object(text: str) -> Mapping[str, Any]:
    """``text`` as a JSON object, or an empty mapping when it is not one."""
    stripped = text.strip()
    if not stripped.startswith("{"):
        return {}
    try:
        value = json.loads(stripped)
    except ValueError:
        return {}
    return value if isinstance(value, Mapping) else {}


def _first(arguments: Mapping[str, Any], *keys: str) -> Any:
    for key in keys:
        if arguments.get(key) not in (None, ""):
            return arguments[key]
    return None


def _size(output: str) -> str:
    lines = output.count("\n") + 1 if output else 0
    return f"{lines:,} lines, {len(output):,} chars"


def _exit_code(output: str) -> str | None:
    parsed = _parse_object(output)
    for key in _JSON_EXIT_KEYS:
        if isinstance(parsed.get(key), int):
            return str(parsed[key])
    match = _EXIT_CODE.search(output[-2_000:]) or _EXIT_CODE.search(output[:2_000])
    return match.group(1) if match else None


def _terminal(name: str, arguments: Mapping[str, Any], output: str) -> str:
    command = _first(arguments, "command", "cmd", "script")
    lines = output.count("\n") + 1 if output else 0
    code = _exit_code(output)
    status = f"exit {code}, " if code is not None else ""
    return f"[{name}] ran `{_preview(command or '?')}` -> {status}{lines:,} lines output"


def _read_file(name: str, arguments: Mapping[str, Any], output: str) -> str:
    path = _first(arguments, "path", "file_path", "file", "filename")
    start = _first(arguments, "offset", "start_line", "line", "start")
    where = f" from line {start}" if start is not None else ""
    return f"[{name}] read {_preview(path or '?')}{where} ({len(output):,} chars)"


def _write_file(name: str, arguments: Mapping[str, Any], output: str) -> str:
    path = _first(arguments, "path", "file_path", "file", "filename")
    return f"[{name}] wrote {_preview(path or '?')} -> {_preview(output)}"


def _search(name: str, arguments: Mapping[str, Any], output: str) -> str:
    query = _first(arguments, "query", "pattern", "q", "search", "regex")
    return f'[{name}] searched "{_preview(query or "?")}" -> {_size(output)}'


def _fetch(name: str, arguments: Mapping[str, Any], output: str) -> str:
    url = _first(arguments, "url", "uri", "link")
    return f"[{name}] fetched {_preview(url or '?')} -> {_size(output)}"


def _generic(name: str, arguments: Mapping[str, Any], output: str) -> str:
    args = ", ".join(f"{k}={_preview(v)}" for k, v in list(arguments.items())[:3])
    return f"[{name}] called ({_preview(args)}) -> {_size(output)}"


_BY_NAME: dict[str, Digest] = {
    **dict.fromkeys(("terminal", "shell", "bash", "run_command", "execute_command"), _terminal),
    **dict.fromkeys(("read_file", "view_file", "open_file", "cat"), _read_file),
    **dict.fromkeys(
        ("write_file", "edit_file", "create_file", "patch", "apply_patch"), _write_file
    ),
    **dict.fromkeys(("search", "grep", "web_search", "search_files", "find"), _search),
    **dict.fromkeys(("fetch", "web_fetch", "browse", "http_get", "read_url"), _fetch),
}


def digest_tool_result(tool_name: str, arguments_json: str, output: str) -> str:
    """A one-line description of a tool call and its result.

    Args:
        tool_name: the function the assistant called.
        arguments_json: the call's argument string (invalid JSON is tolerated).
        output: the tool result's text.
    """
    digest = _BY_NAME.get(tool_name.lower(), _generic)
    return digest(tool_name, _parse_object(arguments_json), output)
