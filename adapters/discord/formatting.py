"""Turn the model's Markdown into the Markdown dialect Discord renders.

Discord renders most of Markdown as it is (bold, italic, strikethrough, code, fenced
blocks, quotes, lists, ``#``-``###`` headings, masked links), so most text passes through.
What Discord would show wrongly or literally is rewritten: ``__bold__`` (Discord
underlines it), ``####`` headings and setext headings, tables (drawn as an aligned code
block), horizontal rules, images, ``~~~`` fences, task-list boxes and ``<br>``. Text Discord
would misread is escaped: ``||`` (spoiler markers), ``-#`` at a line start (subtext) and
underscores joined to a word on both sides. Code blocks and code spans are never touched.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator

RULE = "\u2500" * 12
"""What a Markdown horizontal rule becomes (Discord has none)."""

_FENCE_OPEN = re.compile(r"^(?P<indent>[ \t]{0,3})(?P<marker>`{3,}|~{3,})(?P<info>[^`]*)$")
_HEADING = re.compile(r"^(?P<hashes>#{1,6})[ \t]+(?P<text>.*?)(?:[ \t]+#+)?[ \t]*$")
_SETEXT = re.compile(r"^[ \t]{0,3}(?P<char>=|-)(?P=char){2,}[ \t]*$")
_RULE = re.compile(r"^[ \t]{0,3}(?P<char>[-*_])(?:[ \t]*(?P=char)){2,}[ \t]*$")
_TASK = re.compile(r"^(?P<bullet>[ \t]*[-*+][ \t]+)\[(?P<mark>[ xX])\](?=[ \t])")
_SUBTEXT = re.compile(r"^(?P<indent>[ \t]*)-#(?=[ \t])")
_LIST_OR_QUOTE = re.compile(r"^[ \t]*(?:[-*+>]|\d+[.)])[ \t]")
_TABLE_SEPARATOR = re.compile(r"^[ \t]*\|?[ \t]*:?-+:?[ \t]*(?:\|[ \t]*:?-+:?[ \t]*)+\|?[ \t]*$")
_CODE_SPAN = re.compile(r"(?P<ticks>`+)(?P<body>.+?)(?<!`)(?P=ticks)(?!`)")
_IMAGE = re.compile(r"!\[(?P<alt>[^\]\n]*)\]\((?P<url>[^)\s]+)(?:[ \t]+\"[^\"]*\")?\)")
_STRONG_UNDERSCORE = re.compile(r"(?<![\w\\])__(?=\S)(?P<body>.+?)(?<=\S)__(?!\w)")
_LEFTOVER_DOUBLE_UNDERSCORE = re.compile(r"(?<=\w)__|__(?=\w)")
_SPOILER = re.compile(r"\|\|")
_BREAK = re.compile(r"<br\s*/?>", re.IGNORECASE)
_URL_OR_LINK_TARGET = re.compile(r"\]\([^)\s]+\)|<https?://[^>\s]+>|https?://[^\s<>()]+")
"""Discord's link rules win over formatting, so URLs and link targets are left alone."""
_LINK = re.compile(r"\[(?P<text>[^\]\n]+)\]\((?P<url>[^)\s]+)\)")
_EMPHASIS = re.compile(r"(\*\*|__|~~|\*|`)")
_MARKUP_CHARACTER = re.compile(r"[\\*_~`|>#\-\[\]()<]")
"""Characters Discord may read as markup; a backslash makes any of them literal."""
_BARE_URL = re.compile(r"https?://[^\s<>]+")

_TASK_BOXES = {" ": "\u2610", "x": "\u2611", "X": "\u2611"}
_DISCORD_HEADING_LEVELS = 3


def to_discord_markdown(markdown: str) -> str:
    """Discord-flavoured Markdown for ``markdown`` (same meaning, rendered as intended)."""
    out: list[str] = []
    lines = markdown.replace("\r\n", "\n").split("\n")
    i = 0
    while i < len(lines):
        fence = _FENCE_OPEN.match(lines[i])
        if fence is not None:
            i = _copy_fenced_block(lines, i, fence, out)
            continue
        if _is_table_start(lines, i):
            i = _render_table(lines, i, out)
            continue
        out.append(_convert_line(lines, i, out))
        i += 1
    return "\n".join(out)


def to_literal_text(discord_markdown: str) -> str:
    """The text with every markup character escaped (URLs kept), so Discord shows it as written.

    The fallback when Discord refuses a formatted message: the reader sees the raw
    markup, and nothing of the reply is lost.
    """
    pieces: list[str] = []
    position = 0
    for match in _BARE_URL.finditer(discord_markdown):
        pieces.append(_MARKUP_CHARACTER.sub(r"\\\g<0>", discord_markdown[position : match.start()]))
        pieces.append(match.group(0))
        position = match.end()
    pieces.append(_MARKUP_CHARACTER.sub(r"\\\g<0>", discord_markdown[position:]))
    return "".join(pieces)


def display_width(text: str) -> int:
    """Columns ``text`` takes in a monospaced font (East Asian wide characters take two)."""
    return sum(2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1 for ch in text)


def _copy_fenced_block(lines: list[str], start: int, fence: re.Match[str], out: list[str]) -> int:
    marker = fence.group("marker")
    info = fence.group("info").strip()
    out.append(f"{fence.group('indent')}```{info}")
    i = start + 1
    while i < len(lines):
        stripped = lines[i].strip()
        if stripped.startswith(marker[0] * len(marker)) and not stripped.strip(marker[0]):
            break
        out.append(lines[i])
        i += 1
    out.append(f"{fence.group('indent')}```")
    return i + 1


def _convert_line(lines: list[str], i: int, out: list[str]) -> str:
    line = lines[i]
    previous = out[-1] if out else ""
    setext = _SETEXT.match(line)
    if setext is not None and _is_setext_title(previous):
        out.pop()
        level = "#" if setext.group("char") == "=" else "##"
        return f"{level} {previous.strip()}"
    if _RULE.match(line) is not None:
        return RULE
    heading = _HEADING.match(line)
    if heading is not None:
        text = _convert_inline(heading.group("text"))
        if len(heading.group("hashes")) > _DISCORD_HEADING_LEVELS:
            return f"**{text}**" if text else ""
        return f"{heading.group('hashes')} {text}"
    line = _TASK.sub(lambda m: f"{m.group('bullet')}{_TASK_BOXES[m.group('mark')]}", line)
    line = _SUBTEXT.sub(lambda m: f"{m.group('indent')}\\-#", line)
    return _convert_inline(line)


def _is_setext_title(previous: str) -> bool:
    return (
        bool(previous.strip())
        and _LIST_OR_QUOTE.match(previous) is None
        and not previous.lstrip().startswith(("#", "```"))
        and previous != RULE
    )


def _convert_inline(text: str) -> str:
    return "".join(
        segment if is_code else _convert_prose(segment) for segment, is_code in _code_split(text)
    )


def _code_split(text: str) -> Iterator[tuple[str, bool]]:
    """``text`` cut into (segment, is_code_span) pieces, in order."""
    position = 0
    for match in _CODE_SPAN.finditer(text):
        if match.start() > position:
            yield text[position : match.start()], False
        yield match.group(0), True
        position = match.end()
    if position < len(text):
        yield text[position:], False


def _convert_prose(text: str) -> str:
    text = _BREAK.sub("\n", text)
    text = _IMAGE.sub(_image_as_link, text)
    pieces: list[str] = []
    position = 0
    for match in _URL_OR_LINK_TARGET.finditer(text):
        pieces.append(_convert_words(text[position : match.start()]))
        pieces.append(match.group(0))
        position = match.end()
    pieces.append(_convert_words(text[position:]))
    return "".join(pieces)


def _image_as_link(match: re.Match[str]) -> str:
    alt, url = match.group("alt"), match.group("url")
    return f"[{alt}]({url})" if alt.strip() else url


def _convert_words(text: str) -> str:
    text = _STRONG_UNDERSCORE.sub(lambda m: f"**{m.group('body')}**", text)
    text = _LEFTOVER_DOUBLE_UNDERSCORE.sub(r"\\_\\_", text)
    return _SPOILER.sub(r"\\|\\|", text)


def _is_table_start(lines: list[str], i: int) -> bool:
    return (
        "|" in lines[i]
        and i + 1 < len(lines)
        and _TABLE_SEPARATOR.match(lines[i + 1]) is not None
        and len(_cells(lines[i])) == len(_cells(lines[i + 1]))
    )


def _cells(row: str) -> list[str]:
    body = row.strip()
    body = body.removeprefix("|")
    if body.endswith("|") and not body.endswith("\\|"):
        body = body[:-1]
    return [cell.strip().replace("\\|", "|") for cell in re.split(r"(?<!\\)\|", body)]


def _plain_cell(cell: str) -> str:
    cell = _LINK.sub(lambda m: f"{m.group('text')} ({m.group('url')})", cell)
    return _EMPHASIS.sub("", cell)


def _render_table(lines: list[str], start: int, out: list[str]) -> int:
    header = [_plain_cell(c) for c in _cells(lines[start])]
    rows: list[list[str]] = []
    i = start + 2
    while i < len(lines) and "|" in lines[i] and lines[i].strip():
        cells = [_plain_cell(c) for c in _cells(lines[i])]
        rows.append((cells + [""] * len(header))[: len(header)])
        i += 1
    widths = [max(display_width(row[col]) for row in [header, *rows]) for col in range(len(header))]

    def render(row: list[str]) -> str:
        padded = [cell + " " * (widths[n] - display_width(cell)) for n, cell in enumerate(row)]
        return " | ".join(padded).rstrip()

    out.append("```")
    out.append(render(header))
    out.append("-+-".join("-" * w for w in widths))
    out.extend(render(row) for row in rows)
    out.append("```")
    return i
