"""A model's Markdown reply as QQ messages: split between paragraphs and code blocks, never
inside a fence, and within the platform's count of passive replies to one message.

QQ answers a message with at most `MAX_REPLIES` passive replies (qq-botpy-sdk's default
limiter: 4 per message). A reply that needs more chunks of the usual size is packed again
into chunks of up to `MAX_CHARS`, the most one QQ message is sent with here; one that still
needs more is cut, its last allowed chunk saying so.
"""

from __future__ import annotations

from backend.channels.chunking import markdown_chunks

CHUNK_CHARS = 2_000  # a comfortable message on a phone
MAX_CHARS = 4_000  # the longest message sent (QQ does not publish its limit; kept well under)
MAX_REPLIES = 4  # passive replies to one message (qq-botpy-sdk's default reply limiter)
CUT_NOTE = "\n\n(The rest of this reply did not fit QQ's limit of replies to one message.)"


def qq_chunks(markdown: str, *, replies: int = MAX_REPLIES) -> list[str]:
    """`markdown` as at most `replies` ordered messages of at most MAX_CHARS characters each."""
    chunks = markdown_chunks(markdown, CHUNK_CHARS)
    if len(chunks) <= replies:
        return chunks
    chunks = markdown_chunks(markdown, MAX_CHARS)
    if len(chunks) <= replies:
        return chunks
    kept = chunks[:replies]
    last = markdown_chunks(kept[-1], MAX_CHARS - len(CUT_NOTE))[0]
    return [*kept[:-1], last + CUT_NOTE]
