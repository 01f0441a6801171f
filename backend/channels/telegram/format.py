"""A model's Markdown reply as Telegram messages: HTML in Telegram's subset, at most 4,096
characters each, split between paragraphs and code blocks, never inside a tag or a fence.

Each chunk keeps its Markdown source too: when Telegram refuses the markup, that chunk is sent
again as plain text. Only `<`, `>` and `&` need escaping in Telegram's HTML, which is why it is
chosen over MarkdownV2 (eighteen characters to escape, context-dependent).
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass

MAX_CHARS = 4096
_FENCE = re.compile(r"^```([\w+#.-]*)[^\n]*\n(.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)
_CODE_SPAN = re.compile(r"(`[^`\n]+`)")
_LINK = re.compile(r"\[([^\]\n]+)\]\((https?://[^)\s]+)\)")
_BOLD = re.compile(r"\*\*(?=\S)(.+?)(?<=\S)\*\*|__(?=\S)(.+?)(?<=\S)__")
_ITALIC = re.compile(
    r"(?<![*\w])\*(?=\S)([^*\n]+?)(?<=\S)\*(?!\*)|(?<!\w)_(?=\S)([^_\n]+?)(?<=\S)_(?!\w)"
)
_STRIKE = re.compile(r"~~(?=\S)(.+?)(?<=\S)~~")
_HEADING = re.compile(r"^#{1,6}\s+(.*)$")
_BULLET = re.compile(r"^(\s*)[-*+]\s+")


@dataclass(frozen=True, slots=True)
class Chunk:
    """One Telegram message: `html` for `parse_mode=HTML`, `plain` if Telegram refuses it."""

    html: str
    plain: str


@dataclass(frozen=True, slots=True)
class _Block:
    source: str
    code_language: str | None = None  # set: a fenced code block, `source` its body


def telegram_chunks(markdown: str, *, limit: int = MAX_CHARS) -> list[Chunk]:
    """`markdown` as ordered messages of at most `limit` characters each (HTML and plain)."""
    pieces = [piece for block in _blocks(markdown) for piece in _fit(block, limit)]
    chunks: list[Chunk] = []
    html_parts: list[str] = []
    plain_parts: list[str] = []
    for block in pieces:
        rendered, plain = _render(block), _plain(block)
        joined = "\n\n".join([*html_parts, rendered])
        if html_parts and (len(joined) > limit or len("\n\n".join([*plain_parts, plain])) > limit):
            chunks.append(Chunk("\n\n".join(html_parts), "\n\n".join(plain_parts)))
            html_parts, plain_parts = [], []
        html_parts.append(rendered)
        plain_parts.append(plain)
    if html_parts:
        chunks.append(Chunk("\n\n".join(html_parts), "\n\n".join(plain_parts)))
    return chunks


def _blocks(markdown: str) -> list[_Block]:
    """Fenced code blocks whole, and the paragraphs between them."""
    blocks: list[_Block] = []
    position = 0
    for fence in _FENCE.finditer(markdown):
        blocks += _paragraphs(markdown[position : fence.start()])
        blocks.append(_Block(fence.group(2).rstrip("\n"), code_language=fence.group(1)))
        position = fence.end()
    blocks += _paragraphs(markdown[position:])
    return blocks


def _paragraphs(text: str) -> list[_Block]:
    return [_Block(p.strip("\n")) for p in re.split(r"\n[ \t]*\n", text) if p.strip()]


def _fit(block: _Block, limit: int) -> list[_Block]:
    """`block`, or the blocks it splits into (by lines, then by characters) to fit `limit`."""
    if len(_render(block)) <= limit and len(_plain(block)) <= limit:
        return [block]
    lines = block.source.split("\n")
    if len(lines) == 1:
        half = _split_point(block.source)
        parts = [block.source[:half], block.source[half:]]
    else:
        parts = ["\n".join(lines[: len(lines) // 2]), "\n".join(lines[len(lines) // 2 :])]
    return [
        piece
        for part in parts
        if part.strip()
        for piece in _fit(_Block(part, block.code_language), limit)
    ]


def _split_point(text: str) -> int:
    """The middle of `text`, moved back to a space when there is one near it."""
    middle = len(text) // 2
    space = text.rfind(" ", 0, middle)
    return space + 1 if space > middle // 2 else middle


def _render(block: _Block) -> str:
    if block.code_language is not None:
        language = (
            f' class="language-{html.escape(block.code_language)}"' if block.code_language else ""
        )
        return f"<pre><code{language}>{html.escape(block.source, quote=False)}</code></pre>"
    lines = block.source.split("\n")
    if all(line.startswith(">") for line in lines):
        quoted = [line[1:].removeprefix(" ") for line in lines]
        return "<blockquote>" + "\n".join(_render_line(line) for line in quoted) + "</blockquote>"
    return "\n".join(_render_line(line) for line in lines)


def _render_line(line: str) -> str:
    heading = _HEADING.match(line)
    if heading:
        return f"<b>{_inline(heading.group(1))}</b>"
    line = _BULLET.sub(lambda m: m.group(1) + "• ", line)
    return _inline(line)


def _inline(text: str) -> str:
    """Inline Markdown as HTML; code spans are literal, everything else escaped first."""
    out = []
    for index, part in enumerate(_CODE_SPAN.split(text)):
        if index % 2:
            out.append(f"<code>{html.escape(part[1:-1], quote=False)}</code>")
            continue
        part = html.escape(part, quote=False)
        part = _LINK.sub(
            lambda m: f'<a href="{m.group(2).replace(chr(34), "%22")}">{m.group(1)}</a>', part
        )
        part = _BOLD.sub(lambda m: f"<b>{m.group(1) or m.group(2)}</b>", part)
        part = _ITALIC.sub(lambda m: f"<i>{m.group(1) or m.group(2)}</i>", part)
        part = _STRIKE.sub(lambda m: f"<s>{m.group(1)}</s>", part)
        out.append(part)
    return "".join(out)


def _plain(block: _Block) -> str:
    if block.code_language is not None:
        return f"```{block.code_language}\n{block.source}\n```"
    return block.source
