"""A tenant's settings one key at a time, as the operator's console shows and edits them: each
key's effective value and where it comes from (the admin API, config.yaml, or the default).

Stored overrides stay nested by section, as `PATCH /api/admin/tenants/{id}` and config.yaml's
`tenants:` write them; this module only reads them key by key and sets or drops one key."""

from __future__ import annotations

import copy
import types
from dataclasses import dataclass
from typing import Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel

from backend.errors import InvalidInput
from backend.settings import Settings, layered_overrides, tenant_settings

# The keys the console edits, in the order it shows them.
CONSOLE_KEYS = (
    "persona.name",
    "persona.language",
    "persona.max_history_messages",
    "model.provider",
    "model.name",
    "memory.scope",
    "memory.overflow_batch",
    "quotas.requests_per_minute",
    "quotas.tokens_per_day",
)

Origin = Literal["default", "file", "api"]
Kind = Literal["int", "str", "bool", "choice"]


@dataclass(frozen=True, slots=True)
class SettingField:
    key: str
    value: Any  # effective
    origin: Origin
    file_value: Any  # what config.yaml says (None: it says nothing)
    kind: Kind
    choices: list[Any] | None
    nullable: bool


def fields(base: Settings, tenant_id: str, stored: dict[str, Any]) -> list[SettingField]:
    """Each console key of `tenant_id`, whose API-set overrides are `stored`."""
    effective = tenant_settings(base, tenant_id, layered_overrides(base, tenant_id, stored))
    from_file = base.tenants.get(tenant_id, {})
    result = []
    for key in CONSOLE_KEYS:
        section, name = key.split(".")
        file_section = from_file.get(section) or {}
        base_section = getattr(base, section)
        if name in file_section:
            file_value: Any = file_section[name]
        elif base_section is not None and name in base_section.model_fields_set:
            file_value = getattr(base_section, name)
        else:
            file_value = None
        origin: Origin = "default"
        if name in (stored.get(section) or {}):
            origin = "api"
        elif file_value is not None:
            origin = "file"
        section_value = getattr(effective, section)
        kind, choices, nullable = _describe(
            _unwrap(Settings.model_fields[section].annotation), name
        )
        result.append(
            SettingField(
                key=key,
                value=None if section_value is None else getattr(section_value, name),
                origin=origin,
                file_value=file_value,
                kind=kind,
                choices=choices,
                nullable=nullable,
            )
        )
    return result


def with_values(stored: dict[str, Any], values: dict[str, Any]) -> dict[str, Any]:
    """`stored` with each of `values` set (None: dropped, so config.yaml's value or the
    default applies again). InvalidInput for a key the console does not edit."""
    unknown = sorted(set(values) - set(CONSOLE_KEYS))
    if unknown:
        raise InvalidInput(
            f"{', '.join(unknown)}: not a setting the console edits "
            "(set it with PATCH /api/admin/tenants/{id} or in config.yaml)",
            code="invalid_settings",
        )
    result = copy.deepcopy(stored)
    for key, value in values.items():
        section, name = key.split(".")
        current = result.get(section)
        if not isinstance(current, dict):
            current = result[section] = {}
        if value is None:
            current.pop(name, None)
            if not current:
                del result[section]
        else:
            current[name] = value
    return result


def _unwrap(annotation: Any) -> Any:
    """`X` of `X | None`."""
    if get_origin(annotation) in (Union, types.UnionType):
        return next(a for a in get_args(annotation) if a is not type(None))
    return annotation


def _describe(section_type: type[BaseModel], name: str) -> tuple[Kind, list[Any] | None, bool]:
    """How the console edits `name`: its kind, its choices, whether it may be unset."""
    annotation = section_type.model_fields[name].annotation
    nullable = get_origin(annotation) in (Union, types.UnionType) and type(None) in get_args(
        annotation
    )
    annotation = _unwrap(annotation)
    if get_origin(annotation) is Literal:
        return "choice", list(get_args(annotation)), nullable
    if annotation is bool:
        return "bool", None, nullable
    if annotation is int:
        return "int", None, nullable
    return "str", None, nullable
