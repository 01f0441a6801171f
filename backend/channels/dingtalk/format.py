"""A model's Markdown reply as DingTalk messages: Markdown within the platform's limit, split
between paragraphs and code blocks, never inside a fence; and the title DingTalk shows beside
each in notifications."""

from __future__ import annotations

from backend.channels.chunking import markdown_chunks

# DingTalk refuses Markdown over 5,000 characters; a margin for the title it shows beside it.
MAX_CHARS = 4_000
TITLE_CHARS = 40


def dingtalk_chunks(markdown: str, *, limit: int = MAX_CHARS) -> list[str]:
    """`markdown` as ordered messages of at most `limit` characters each."""
    return markdown_chunks(markdown, limit)


def title_of(text: str) -> str:
    """What DingTalk shows of a message in notifications: its first words, without markup."""
    first = text.strip().split("\n", 1)[0].lstrip("#>*-` ").strip()
    return first[:TITLE_CHARS] or "Reply"
