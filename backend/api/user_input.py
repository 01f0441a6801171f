"""Turn a `message` body (a string or content parts) into a checked `UserInput`."""

from __future__ import annotations

import base64
import binascii

from backend.api.schemas import ContentPartIn, ImagePartIn
from backend.domain.messages import ImagePart, UserInput
from backend.domain.text import text_problem
from backend.errors import InvalidInput, PayloadTooLarge

MAX_IMAGES = 8
MAX_IMAGE_BYTES = 5 * 1024 * 1024
# The first bytes of each image type we accept: a part labelled image/png must be one.
SIGNATURES = {
    "image/png": (b"\x89PNG\r\n\x1a\n",),
    "image/jpeg": (b"\xff\xd8\xff",),
    "image/gif": (b"GIF87a", b"GIF89a"),
}


def to_user_input(message: str | list[ContentPartIn], *, max_chars: int) -> UserInput:
    images: tuple[ImagePart, ...] = ()
    if isinstance(message, str):
        text = message
    else:
        text = "\n".join(part.text for part in message if not isinstance(part, ImagePartIn))
        images = tuple(_image(part) for part in message if isinstance(part, ImagePartIn))
    _check_text(text, max_chars=max_chars)
    if not text.strip() and not images:
        raise InvalidInput("the message is empty", code="empty_message")
    if len(images) > MAX_IMAGES:
        raise InvalidInput(f"at most {MAX_IMAGES} images per message", code="too_many_images")
    return UserInput(text=text, images=images)


def _check_text(text: str, *, max_chars: int) -> None:
    if len(text) > max_chars:
        raise PayloadTooLarge(
            f"the message has {len(text)} characters; the limit is {max_chars}",
            code="message_too_long",
        )
    problem = text_problem(text)
    if problem is not None:
        raise InvalidInput(f"the message {problem}", code="invalid_text")


def _image(part: ImagePartIn) -> ImagePart:
    try:
        raw = base64.b64decode(part.data, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise InvalidInput("an image's data is not valid base64", code="invalid_image") from exc
    if len(raw) > MAX_IMAGE_BYTES:
        raise PayloadTooLarge(
            f"an image is larger than {MAX_IMAGE_BYTES} bytes", code="image_too_large"
        )
    if not _is_image_of_type(raw, part.media_type):
        what = "is empty" if not raw else f"is not a {part.media_type} image"
        raise InvalidInput(f"an image's data {what}", code="invalid_image")
    return ImagePart(media_type=part.media_type, data=part.data)


def _is_image_of_type(raw: bytes, media_type: str) -> bool:
    if media_type == "image/webp":
        return raw[:4] == b"RIFF" and raw[8:12] == b"WEBP"
    return raw.startswith(SIGNATURES.get(media_type, ()))
