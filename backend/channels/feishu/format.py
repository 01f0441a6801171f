"""A model's Markdown reply as Feishu messages: rich text (`post`) whose one element is an
`md` element, which Feishu renders (bold, italics, links, lists, quotes, code blocks); headings,
which it does not, become bold lines. Split between paragraphs and code blocks, never inside a
fence, within a limit well under Feishu's 30 KB a message (a character of Chinese is 3 bytes,
and the JSON around it adds more). A command's choices are buttons on an interactive card."""

from __future__ import annotations

import re
from typing import Any

from backend.channels.chunking import Block, pack, pieces
from backend.channels.commands import Choice

MAX_CHARS = 4_000
HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$")
FENCE = re.compile(r"^\s*(```|~~~)")


def feishu_chunks(markdown: str, *, limit: int = MAX_CHARS) -> list[str]:
    """`markdown` as ordered messages of at most `limit` characters each."""

    def fits(blocks: list[Block]) -> bool:
        return len(_joined(blocks)) <= limit

    blocks = pieces(markdown, lambda block: fits([block]))
    return [_joined(group) for group in pack(blocks, fits)]


def _joined(blocks: list[Block]) -> str:
    return "\n\n".join(block.markdown() for block in blocks)


def feishu_markdown(markdown: str) -> str:
    """`markdown` as Feishu's `md` element renders it: headings as bold lines, fences kept."""
    lines, fenced = [], False
    for line in markdown.split("\n"):
        if FENCE.match(line):
            fenced = not fenced
        heading = None if fenced else HEADING.match(line)
        lines.append(f"**{heading.group(2)}**" if heading else line)
    return "\n".join(lines)


def post_content(markdown: str) -> dict[str, Any]:
    """A `post` message's content: one paragraph holding one `md` element."""
    return {"zh_cn": {"content": [[{"tag": "md", "text": feishu_markdown(markdown)}]]}}


def card_content(markdown: str, choices: list[Choice], value: dict[str, Any]) -> dict[str, Any]:
    """An interactive card: `markdown`, then a button a choice; pressing one sends back
    `value` with the choice's `data` (`card.action.trigger`)."""
    buttons = [
        {
            "tag": "button",
            "text": {"tag": "plain_text", "content": choice.label},
            "type": "primary" if index == 0 else "default",
            "value": value | {"data": choice.data},
        }
        for index, choice in enumerate(choices)
    ]
    return {
        "config": {"wide_screen_mode": True},
        "elements": [
            {"tag": "markdown", "content": feishu_markdown(markdown)},
            {"tag": "action", "actions": buttons},
        ],
    }
