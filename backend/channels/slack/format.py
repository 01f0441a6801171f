"""A model's Markdown reply as Slack messages in mrkdwn, Slack's own markup: bold `*x*`,
italic `_x_`, strike `~x~`, links `<url|text>`, code fences kept (without their language,
which mrkdwn does not take); `&`, `<` and `>` escaped as Slack asks. Each message is at most
`MAX_CHARS`, split between paragraphs and code blocks, never inside a fence.

Slack takes up to 40,000 characters in `text` but cuts what it shows of a long message and
advises 4,000 at most; 3,500 leaves room for the escapes.
"""

from __future__ import annotations

import re

from backend.channels.chunking import Block, pack, pieces

MAX_CHARS = 3_500
_CODE_SPAN = re.compile(r"(`[^`\n]+`)")
_LINK = re.compile(r"\[([^\]\n]+)\]\((https?://[^)\s]+)\)")
_BOLD = re.compile(r"\*\*(?=\S)(.+?)(?<=\S)\*\*|__(?=\S)(.+?)(?<=\S)__")
_ITALIC = re.compile(r"(?<![*\w])\*(?=\S)([^*\n]+?)(?<=\S)\*(?!\*)")
_STRIKE = re.compile(r"~~(?=\S)(.+?)(?<=\S)~~")
_HEADING = re.compile(r"^#{1,6}\s+(.*)$")
_BULLET = re.compile(r"^(\s*)[-*+]\s+")
_BOLD_MARK = "\x00"  # bold is rendered after italic, which would read its `*` again


def slack_chunks(markdown: str, *, limit: int = MAX_CHARS) -> list[str]:
    """`markdown` as ordered mrkdwn messages of at most `limit` characters each."""

    def fits(blocks: list[Block]) -> bool:
        return len(_joined(blocks)) <= limit

    blocks = pieces(markdown, lambda block: fits([block]))
    return [_joined(group) for group in pack(blocks, fits)]


def escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _joined(blocks: list[Block]) -> str:
    return "\n\n".join(map(_render, blocks))


def _render(block: Block) -> str:
    if block.code_language is not None:
        return f"```\n{escape(block.source)}\n```"
    lines = block.source.split("\n")
    if all(line.startswith(">") for line in lines):  # mrkdwn quotes with `>` too
        return "\n".join("&gt; " + _render_line(line[1:].removeprefix(" ")) for line in lines)
    return "\n".join(_render_line(line) for line in lines)


def _render_line(line: str) -> str:
    heading = _HEADING.match(line)
    if heading:
        return f"*{_inline(heading.group(1))}*"
    line = _BULLET.sub(lambda m: m.group(1) + "• ", line)
    return _inline(line)


def _inline(text: str) -> str:
    """Inline Markdown as mrkdwn; code spans are literal, everything else escaped first."""
    out = []
    for index, part in enumerate(_CODE_SPAN.split(text)):
        if index % 2:
            out.append(escape(part))
            continue
        part = escape(part)
        part = _LINK.sub(lambda m: f"<{m.group(2).replace('|', '%7C')}|{m.group(1)}>", part)
        part = _BOLD.sub(lambda m: _BOLD_MARK + (m.group(1) or m.group(2)) + _BOLD_MARK, part)
        part = _ITALIC.sub(lambda m: f"_{m.group(1)}_", part)
        part = _STRIKE.sub(lambda m: f"~{m.group(1)}~", part)
        out.append(part.replace(_BOLD_MARK, "*"))
    return "".join(out)
