"""What providers that answer without a model (the scripted fake, the demo) read of a request:
the user's last words, quoted short, and word counts standing in for token usage."""

from __future__ import annotations

from backend.domain.requests import ChatRequest

QUOTE_CHARS = 80


def last_user_text(request: ChatRequest) -> str:
    for message in reversed(request.messages):
        if message.role == "user":
            return message.content
    return ""


def quote(text: str, limit: int = QUOTE_CHARS) -> str:
    """`text` on one line, cut to `limit` characters with an ellipsis."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def word_count(text: str) -> int:
    return len(text.split())


def prompt_words(request: ChatRequest) -> int:
    return word_count(request.system) + sum(word_count(m.content) for m in request.messages)
