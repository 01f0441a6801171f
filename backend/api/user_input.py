"""A `message` body (a string or content parts) as the `UserInput` it carries. The checks are
the chat service's, the same for every entry point (`chat/user_input.py`)."""

from __future__ import annotations

from backend.api.schemas import ContentPartIn, ImagePartIn
from backend.domain.messages import ImagePart, UserInput


def to_user_input(message: str | list[ContentPartIn]) -> UserInput:
    if isinstance(message, str):
        return UserInput(text=message)
    text = "\n".join(part.text for part in message if not isinstance(part, ImagePartIn))
    images = tuple(
        ImagePart(media_type=part.media_type, data=part.data)
        for part in message
        if isinstance(part, ImagePartIn)
    )
    return UserInput(text=text, images=images)
