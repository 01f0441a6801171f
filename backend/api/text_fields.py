"""Free-text fields of the API (bodies, query parameters, headers) checked in one place: text
that no backend could store is 422 `invalid_text` on every backend, never a 500 on one."""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, Field
from pydantic_core import PydanticCustomError

from backend.domain.text import text_problem
from backend.memory.base import MAX_SCOPE_KEY_LENGTH

INVALID_TEXT = "invalid_text"  # the pydantic error type, turned into our code in api/errors.py


def storable(text: str) -> str:
    problem = text_problem(text)
    if problem is not None:
        raise PydanticCustomError(INVALID_TEXT, "the text {problem}", {"problem": problem})
    return text


def checked_optional(text: str | None) -> str | None:
    return None if text is None else storable(text)


Text = Annotated[str, AfterValidator(storable)]
Title = Annotated[str, Field(max_length=200), AfterValidator(storable)]


def one_printable_line(text: str) -> str:
    """A key that names something (an end user): no line breaks, tabs or control characters,
    as a memory scope requires, so it is refused here rather than after a message is stored."""
    if not text.isprintable():
        raise PydanticCustomError(
            INVALID_TEXT, "the text must be printable: no line breaks, tabs or control characters"
        )
    return text


# The tenant's own name for one of its end users: with `memory.scope: user`, each has a memory.
EndUser = Annotated[
    str,
    Field(min_length=1, max_length=MAX_SCOPE_KEY_LENGTH),
    AfterValidator(storable),
    AfterValidator(one_printable_line),
]
