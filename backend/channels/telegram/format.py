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

from backend.channels.chunking import Block, pack, pieces

MAX_CHARS = 4096
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


def telegram_chunks(markdown: str, *, limit: int = MAX_CHARS) -> list[Chunk]:
    """`markdown` as ordered messages of at most `limit` characters each (HTML and plain)."""

    def fits(blocks: list[Block]) -> bool:
        html_text, plain = _joined(blocks)
        return len(html_text) <= limit and len(plain) <= limit

    blocks = pieces(markdown, lambda block: fits([block]))
    return [Chunk(*_joined(group)) for group in pack(blocks, fits)]


def _joined(blocks: list[Block]) -> tuple[str, str]:
    return "\n\n".join(map(_render, blocks)), "\n\n".join(b.markdown() for b in blocks)


def _render(block: Block) -> str:
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
