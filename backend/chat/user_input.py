"""What a user sent, checked the same way whatever carried it (the page, the API, `/v1`, the
terminal, a chat channel): text no backend can store, a message too long, no content, images
that are not what they say. Each refusal is a clear 4xx and stores nothing."""

from __future__ import annotations

import base64
import binascii

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


def check_user_input(user_input: UserInput, *, max_chars: int) -> UserInput:
    """`user_input` unchanged, or InvalidInput / PayloadTooLarge saying what is wrong."""
    text = user_input.text
    if len(text) > max_chars:
        raise PayloadTooLarge(
            f"the message has {len(text)} characters; the limit is {max_chars}",
            code="message_too_long",
        )
    problem = text_problem(text)
    if problem is not None:
        raise InvalidInput(f"the message {problem}", code="invalid_text")
    if not text.strip() and not user_input.images:
        raise InvalidInput("the message is empty", code="empty_message")
    if len(user_input.images) > MAX_IMAGES:
        raise InvalidInput(f"at most {MAX_IMAGES} images per message", code="too_many_images")
    for image in user_input.images:
        _check_image(image)
    return user_input


def image_part(media_type: str, raw: bytes) -> ImagePart:
    """An image a channel received as bytes, as the part a message carries."""
    return ImagePart(media_type=media_type, data=base64.b64encode(raw).decode("ascii"))


def image_type(raw: bytes) -> str | None:
    """The media type of an image a platform sent without naming it, from its first bytes."""
    for media_type in (*SIGNATURES, "image/webp"):
        if _is_image_of_type(raw, media_type):
            return media_type
    return None


def _check_image(image: ImagePart) -> None:
    try:
        raw = base64.b64decode(image.data, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise InvalidInput("an image's data is not valid base64", code="invalid_image") from exc
    if len(raw) > MAX_IMAGE_BYTES:
        raise PayloadTooLarge(
            f"an image is larger than {MAX_IMAGE_BYTES} bytes", code="image_too_large"
        )
    if not _is_image_of_type(raw, image.media_type):
        what = "is empty" if not raw else f"is not a {image.media_type} image"
        raise InvalidInput(f"an image's data {what}", code="invalid_image")


def _is_image_of_type(raw: bytes, media_type: str) -> bool:
    if media_type == "image/webp":
        return raw[:4] == b"RIFF" and raw[8:12] == b"WEBP"
    return raw.startswith(SIGNATURES.get(media_type, ()))
