"""How a configuration error is worded: the file, then one `key.path: reason` line a problem,
with a hint for keys people write by habit and the nearest known key for a typo."""

from __future__ import annotations

import difflib
from typing import Any

from pydantic import BaseModel, ValidationError


def describe_problems(source: str, problems: list[str]) -> str:
    """The one shape of every configuration error: the file, then `key.path: reason` lines."""
    return "\n".join([f"{source}: invalid configuration", *(f"  {p}" for p in problems)])


def describe_validation_error(
    source: str, exc: ValidationError, key_prefix: str = "", *, root: type[BaseModel]
) -> str:
    problems = []
    for error in exc.errors():
        loc = tuple(error["loc"])
        key = ".".join(str(part) for part in loc) or "(top level)"
        reason = _unknown_key(root, loc) if error["type"] == "extra_forbidden" else error["msg"]
        problems.append(f"{key_prefix}{key}: {reason}")
    return describe_problems(source, problems)


# Keys people write by habit, and what Tally wants instead.
KEY_HINTS = {
    "api_key": "secrets never go in the file: put the key in an environment variable and name"
    " it with api_key_env (e.g. api_key_env: OPENAI_API_KEY)",
}


def _unknown_key(root: type[BaseModel], loc: tuple[int | str, ...]) -> str:
    name = str(loc[-1])
    if name in KEY_HINTS:
        return f"unknown key; {KEY_HINTS[name]}"
    known = _known_keys(root, loc[:-1])
    close = difflib.get_close_matches(name, known, n=1)
    return f"unknown key (did you mean {close[0]}?)" if close else "unknown key"


def _known_keys(root: type[BaseModel], loc: tuple[int | str, ...]) -> list[str]:
    """The keys allowed at `loc`, found by walking the settings models (map keys skipped)."""
    model: type[BaseModel] = root
    parts = list(loc)
    while parts:
        field = model.model_fields.get(str(parts.pop(0)))
        nested = _model_of(field.annotation if field else None)
        if nested is None:
            return []
        if field is not None and _is_collection(field.annotation) and parts:
            parts.pop(0)  # a name under providers:, an index in fallbacks:
        model = nested
    return list(model.model_fields)


def _model_of(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for argument in getattr(annotation, "__args__", ()):
        found = _model_of(argument)
        if found is not None:
            return found
    return None


def _is_collection(annotation: Any) -> bool:
    return getattr(annotation, "__origin__", None) in (dict, list)
