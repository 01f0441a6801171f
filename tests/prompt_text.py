"""What a model request tells the model besides the conversation itself."""

from __future__ import annotations

from backend.domain.requests import ChatRequest


def prompt_text(request: ChatRequest) -> str:
    """The system prompt and the turn's context: memory reaches the model in either, the
    standing lines in the first and those picked for the message in the second."""
    contexts = [message.context for message in request.messages if message.context]
    return "\n".join([request.system, *contexts])
