"""Markdown, as models write it, to Slack mrkdwn.

Slack's markup differs from Markdown: ``*bold*``, ``_italic_``, ``~strike~``, links as
``<url|text>``, no headings, no tables, and ``&``, ``<``, ``>`` must be escaped everywhere
(they start Slack's control sequences). Every entity this module writes is opened and
closed by the same conversion, so a converted chunk is balanced whenever its Markdown was.
"""

from __future__ import annotations

import re

_FENCE = re.compile(r"^(\s*)(```|~~~)([^\n`]*)$")
_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+(.*?)(?:\s+#+)?\s*$")
_RULE = re.compile(r"^\s{0,3}([-*_])(?:\s*\1){2,}\s*$")
_BULLET = re.compile(r"^(\s*)[-*+]\s+(?:\[(?P<task>[ xX])\]\s+)?(?P<rest>.*)$")
_QUOTE = re.compile(r"^\s{0,3}>\s?(.*)$")
_TABLE_ROW = re.compile(r"^\s*\|.*\|\s*$")
_TABLE_RULE = re.compile(r"^\s*\|?\s*:?-+:?\s*(?:\|\s*:?-+:?\s*)*\|?\s*$")
_INLINE = re.compile(
    r"\\(?P<esc>[\\`*_{}\[\]()#+\-.!~|<>])"
    r"|(?P<tick>`+)(?P<code>.+?)(?P=tick)"
    r"|!\[(?P<img_alt>[^\]\n]*)\]\((?P<img_url>[^)\s]+)(?:\s+\"[^\"\n]*\")?\)"
    r"|\[(?P<link_text>[^\]\n]+)\]\((?P<link_url>[^)\s]+)(?:\s+\"[^\"\n]*\")?\)"
    r"|<(?P<auto>(?:https?|mailto):[^>\s]+)>"
    r"|(?P<bi>\*\*\*|___)(?=\S)(?P<bi_body>.+?)(?<=\S)(?P=bi)"
    r"|(?P<b>\*\*|__)(?=\S)(?P<b_body>.+?)(?<=\S)(?P=b)"
    r"|~~(?=\S)(?P<s_body>.+?)(?<=\S)~~"
    r"|(?<![\w*\\])\*(?=[^\s*])(?P<i_star>[^*\n]*?[^\s*\\])\*(?![\w*])"
    r"|(?<![\w_\\])_(?=[^\s_])(?P<i_under>[^_\n]*?[^\s_\\])_(?![\w_])"
)
_LINKABLE = re.compile(r"^(?:https?|mailto):", re.IGNORECASE)

BULLET = "•"
RULE = "──────────"
TASK_OPEN = "☐"
TASK_DONE = "☑"
WORD_JOINER = "\u200b"
"""Slack only sees ``*bold*`` between non-word characters; a zero-width space next to a
letter (``**foo**bar``, or CJK text, which has no spaces) makes the boundary."""
_MARKERS = frozenset("*_~`")
_BACKTICK_LOOKALIKE = "\u02cb"


def escape(text: str) -> str:
    """Escape the three characters Slack reserves for its control sequences."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _url(url: str) -> str:
    # A "|" would end the URL part of <url|text>; "&" must be escaped like everywhere else.
    return escape(url).replace("|", "%7C")


def _link(url: str, label: str) -> str:
    if not _LINKABLE.match(url):
        return f"{escape(label)} ({escape(url)})" if label else escape(url)
    if not label or label == url:
        return f"<{_url(url)}>"
    return f"<{_url(url)}|{escape(label)}>"


def _wrap(marker: str, body: str) -> str:
    inner = inline(body)
    return f"{marker}{inner}{marker}" if inner.strip() else inner


def _entity(match: re.Match[str]) -> str:
    groups = match.groupdict()
    if groups["esc"] is not None:
        return escape(groups["esc"])
    if groups["code"] is not None:
        # Slack code spans cannot hold a backtick; show it as a look-alike.
        code = escape(groups["code"].strip() or groups["code"])
        return f"`{code.replace('`', _BACKTICK_LOOKALIKE)}`"
    if groups["img_url"] is not None:
        return _link(groups["img_url"], groups["img_alt"] or groups["img_url"])
    if groups["link_url"] is not None:
        return _link(groups["link_url"], groups["link_text"])
    if groups["auto"] is not None:
        return f"<{_url(groups['auto'])}>"
    if groups["bi_body"] is not None:
        inner = inline(groups["bi_body"])
        return f"*_{inner}_*"
    if groups["b_body"] is not None:
        return _wrap("*", groups["b_body"])
    if groups["s_body"] is not None:
        return _wrap("~", groups["s_body"])
    body = groups["i_star"] if groups["i_star"] is not None else groups["i_under"]
    return _wrap("_", body)


def inline(text: str) -> str:
    """Convert one line's inline Markdown (code, links, emphasis); escape the rest."""
    out: list[str] = []
    pos = 0
    for match in _INLINE.finditer(text):
        before = text[pos : match.start()]
        after = text[match.end() : match.end() + 1]
        converted = _entity(match)
        if match.group("esc") is None:
            if converted[:1] in _MARKERS and before[-1:].isalnum():
                converted = WORD_JOINER + converted
            if converted[-1:] in _MARKERS and after.isalnum():
                converted += WORD_JOINER
        out.append(escape(before))
        out.append(converted)
        pos = match.end()
    out.append(escape(text[pos:]))
    return "".join(out)


def _line(line: str) -> str:
    if _RULE.match(line):
        return RULE
    heading = _HEADING.match(line)
    if heading is not None:
        body = inline(heading.group(1))
        return f"*{body}*" if body and "*" not in body else body
    bullet = _BULLET.match(line)
    if bullet is not None:
        task = bullet.group("task")
        box = "" if task is None else (TASK_OPEN if task == " " else TASK_DONE) + " "
        return f"{bullet.group(1)}{BULLET} {box}{inline(bullet.group('rest'))}"
    quote = _QUOTE.match(line)
    if quote is not None:
        # The quote marker is Slack syntax only at the start of a line, unescaped.
        return f">{' ' if quote.group(1) else ''}{_line(quote.group(1))}"
    return inline(line)


def _code_block(lines: list[str]) -> str:
    body = escape("\n".join(lines))
    return f"```\n{body}\n```" if body else "```\n```"


def _is_table(lines: list[str], i: int) -> bool:
    return (
        i + 1 < len(lines)
        and _TABLE_ROW.match(lines[i]) is not None
        and _TABLE_RULE.match(lines[i + 1]) is not None
    )


def to_mrkdwn(markdown: str) -> str:
    """The Slack mrkdwn for ``markdown``.

    Fenced code keeps its lines (Slack shows no language, so the tag is dropped); tables
    become code blocks, which keep their columns aligned; headings become bold lines;
    bullets become ``•``.
    """
    lines = markdown.split("\n")
    out: list[str] = []
    i = 0
    while i < len(lines):
        fence = _FENCE.match(lines[i])
        if fence is not None:
            marker = fence.group(2)
            body: list[str] = []
            i += 1
            while i < len(lines) and not lines[i].strip().startswith(marker):
                body.append(lines[i])
                i += 1
            i += 1  # the closing fence, or the end of an unterminated block
            out.append(_code_block(body))
            continue
        if _is_table(lines, i):
            table: list[str] = []
            while i < len(lines) and (_TABLE_ROW.match(lines[i]) or _TABLE_RULE.match(lines[i])):
                table.append(lines[i].strip())
                i += 1
            out.append(_code_block(table))
            continue
        out.append(_line(lines[i]))
        i += 1
    return "\n".join(out)
