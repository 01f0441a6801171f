"""How a configuration error is worded: the file, then one `key.path: reason` line a problem,
with a hint for keys people write by habit and the nearest known key for a typo."""

from __future__ import annotations

import copy
import difflib
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ValidationError


def describe_problems(source: str, problems: list[str]) -> str:
    """The one shape of every configuration error: the file, then `key.path: reason` lines."""
    return "\n".join([f"{source}: invalid configuration", *(f"  {p}" for p in problems)])


def describe_validation_error(
    source: str, exc: ValidationError, key_prefix: str = "", *, root: type[BaseModel]
) -> str:
    problems = [f"{key_prefix}{line}" for _, line in validation_problems(exc, root=root)]
    return describe_problems(source, problems)


def validation_problems(
    exc: ValidationError, *, root: type[BaseModel]
) -> list[tuple[Location, str]]:
    """(where, `key.path: reason`) for each problem pydantic found."""
    problems = []
    for error in exc.errors():
        loc = tuple(error["loc"])
        key = ".".join(str(part) for part in loc) or "(top level)"
        reason = _unknown_key(root, loc) if error["type"] == "extra_forbidden" else error["msg"]
        problems.append((loc, f"{key}: {reason}"))
    return problems


M = TypeVar("M", bound=BaseModel)
Location = tuple[int | str, ...]
MAX_ROUNDS = 20  # each round leaves out at least one key; a config has far fewer mistakes


@dataclass
class Validated(Generic[M]):
    """What a config's values make, with every problem found: `model` is built from the values
    without the keys in error (None when even that fails), so the checks that need a model
    (providers named, tools, templates) still run and report theirs in the same pass."""

    model: M | None
    problems: list[str] = field(default_factory=list)
    left_out: list[Location] = field(default_factory=list)  # the keys in error, left out

    def is_left_out(self, loc: Location) -> bool:
        return any(loc[: len(out)] == out for out in self.left_out)


def validate_collecting(root: type[M], raw: dict[str, Any], key_prefix: str = "") -> Validated[M]:
    """Validate `raw`; at each problem leave its key out (its default applies) and validate
    again, so one pass names every key in error, never one a consequence of another."""
    data = copy.deepcopy(raw)
    found: Validated[M] = Validated(None)
    for _ in range(MAX_ROUNDS):
        try:
            found.model = root.model_validate(data)
            return found
        except ValidationError as exc:
            problems = validation_problems(exc, root=root)
        found.problems += [
            key_prefix + line for loc, line in problems if not found.is_left_out(loc)
        ]
        left_out = [
            _leave_out(data, loc)
            for loc in sorted({where for where, _ in problems}, key=_order, reverse=True)
        ]
        if not any(left_out):
            return found
        found.left_out += [loc for loc in left_out if loc]
    return found


def _order(loc: Location) -> tuple[tuple[int, int | str], ...]:
    """Sorts locations so a list's later items come first: leaving one out moves none unseen."""
    return tuple((0, part) if isinstance(part, int) else (1, part) for part in loc)


def _leave_out(data: Any, loc: Location) -> Location:
    """Remove the deepest value of `loc` that `data` holds; where it was (() when none)."""
    node, path = data, []
    for part in loc:
        if isinstance(node, dict) and part in node:
            pass
        elif isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
            pass
        else:
            break
        path.append(part)
        if len(path) < len(loc):
            node = node[part]
    if not path:
        return ()
    parent = data
    for part in path[:-1]:
        parent = parent[part]
    del parent[path[-1]]
    return tuple(path)


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
