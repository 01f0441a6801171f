"""A model's Markdown reply as Discord messages: Discord renders Markdown itself, so a reply is
only split, between paragraphs and code blocks and never inside a fence, into messages within
Discord's 2,000-character limit."""

from __future__ import annotations

from backend.channels.chunking import markdown_chunks

MAX_CHARS = 2_000  # Discord refuses longer content (400, code 50035)


def discord_chunks(markdown: str, *, limit: int = MAX_CHARS) -> list[str]:
    """`markdown` as ordered messages of at most `limit` characters each."""
    return markdown_chunks(markdown, limit)
