"""`config.yaml`, parsed once and strictly into typed settings.

An unknown key or a bad value stops start-up with the file, the key path and the reason.
Secrets never live in the file: a provider names the environment variable holding its key.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Collection, Sequence
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import (
    Field,
    PrivateAttr,
    field_validator,
)

from backend.domain.tenants import DEFAULT_TENANT, TENANT_ID
from backend.errors import ConfigError
from backend.host.shipped_files import prompts_dir as bundled_prompts
from backend.settings.base import Strict
from backend.settings.channels import ChannelSettings, bot_name_problems
from backend.settings.coordination import CoordinationSettings
from backend.settings.logs import LoggingSettings
from backend.settings.memory import EmbeddingSettings, MemorySettings
from backend.settings.pricing import PricingSettings
from backend.settings.problems import Validated, describe_problems, validate_collecting
from backend.settings.providers import ModelSettings, ProviderSettings
from backend.settings.server import AuthSettings, DatabaseSettings, ServerSettings
from backend.settings.tools import ToolSettings

DEFAULT_CONFIG = Path("config.yaml")


class SummarizerSettings(Strict):
    provider: str | None = None
    name: str | None = None


class PersonaSettings(Strict):
    name: str = Field("Tally", min_length=1, max_length=80)
    language: Literal["en", "zh"] = "en"
    max_history_messages: int = Field(50, ge=-1)
    system_template: str = "system.md.j2"

    @field_validator("name")
    @classmethod
    def _one_plain_line(cls, value: str) -> str:
        # The name is rendered into the system prompt: it must not be able to start a line.
        if any(ord(c) < 32 or 0x7F <= ord(c) <= 0x9F or c in "\u2028\u2029" for c in value):
            raise ValueError("one line of text: no line breaks or control characters")
        return value

    @field_validator("max_history_messages")
    @classmethod
    def _not_zero(cls, value: int) -> int:
        if value == 0:
            raise ValueError("use -1 for unlimited, or a positive number of messages")
        return value

    @field_validator("system_template")
    @classmethod
    def _plain_name(cls, value: str) -> str:
        if "/" in value or "\\" in value or value.startswith("."):
            raise ValueError("a file name inside prompts/, without directories")
        return value


class CompactionSettings(Strict):
    normal_ratio: float = Field(0.70, gt=0, le=1)
    emergency_ratio: float = Field(0.95, gt=0, le=1)


class QuotaSettings(Strict):
    requests_per_minute: int | None = Field(None, ge=1)
    tokens_per_day: int | None = Field(None, ge=1)


class Settings(Strict):
    server: ServerSettings = ServerSettings()
    auth: AuthSettings = AuthSettings()
    database: DatabaseSettings = DatabaseSettings()
    providers: dict[str, ProviderSettings] = Field(default_factory=dict)
    model: ModelSettings | None = None
    summarizer: SummarizerSettings = SummarizerSettings()
    persona: PersonaSettings = PersonaSettings()
    memory: MemorySettings = MemorySettings()
    compaction: CompactionSettings = CompactionSettings()
    tools: ToolSettings = ToolSettings()
    quotas: QuotaSettings = QuotaSettings()
    pricing: PricingSettings = PricingSettings()  # the usage's estimated cost
    coordination: CoordinationSettings = CoordinationSettings()
    logging: LoggingSettings = LoggingSettings()  # how `tally serve` writes its log
    channels: dict[str, ChannelSettings] = Field(default_factory=dict)  # the default tenant's
    tenants: dict[str, dict[str, Any]] = Field(default_factory=dict)
    prompts_dir: str = "prompts"
    data_dir: str = "data"

    # The file these settings came from, named in every configuration error found later.
    _source: str = PrivateAttr(default="config")

    @property
    def source(self) -> str:
        return self._source


def reference_errors(settings: Settings, left_out: Collection[str] = ()) -> list[str]:
    """`key.path: reason` for each model that names a provider not defined under `providers`
    (but for those `left_out`: defined, with a problem of their own)."""
    refs: list[tuple[str, str | None]] = []
    if settings.model is not None:
        refs.append(("model.provider", settings.model.provider))
        refs += [
            (f"model.fallbacks.{index}.provider", fallback.provider)
            for index, fallback in enumerate(settings.model.fallbacks)
        ]
    refs.append(("summarizer.provider", settings.summarizer.provider))
    embeddings = settings.memory.embeddings
    if isinstance(embeddings, EmbeddingSettings):
        refs.append(("memory.embeddings.provider", embeddings.provider))
    defined = ", ".join(settings.providers) or "none"
    problems = [
        f"{key}: provider {name!r} is not defined under providers: (defined: {defined})"
        for key, name in refs
        if name is not None and name not in settings.providers and name not in left_out
    ]
    if isinstance(embeddings, EmbeddingSettings) and embeddings.provider in settings.providers:
        kind = settings.providers[embeddings.provider].kind
        if kind != "openai_compatible":
            problems.append(
                f"memory.embeddings.provider: {embeddings.provider!r} is of kind {kind}, which"
                " has no embeddings endpoint (use an openai_compatible provider)"
            )
    return problems


def load_settings(path: Path | str | None = None) -> Settings:
    """Read and validate the config file named by `path`, `TALLY_CONFIG` or `config.yaml`.

    Relative paths inside the file (database, prompts, data, MEMORY.md) are resolved against
    the file's directory, so the server behaves the same from any working directory. With no
    file named and no `config.yaml` here, the built-in defaults apply, with the data in the
    working directory; a named file that is missing is an error.
    """
    named = path or os.environ.get("TALLY_CONFIG")
    if not named and not DEFAULT_CONFIG.exists():
        return builtin_settings()
    file = Path(named or DEFAULT_CONFIG)
    try:
        raw = yaml.safe_load(file.read_text(encoding="utf-8")) or {}
    except OSError as exc:
        raise ConfigError(f"{file}: cannot read the config file: {exc.strerror}") from exc
    except yaml.YAMLError as exc:
        raise ConfigError(f"{file}: not valid YAML: {exc}") from exc
    if not isinstance(raw, dict):
        raise ConfigError(f"{file}: the top level must be a mapping of settings")
    return parse_settings(raw, source=str(file), base_dir=file.resolve().parent)


def builtin_settings() -> Settings:
    """The defaults, for a server started where there is no config file: the database,
    MEMORY.md and the data directory in the working directory, the bundled prompts."""
    here = Path.cwd()
    settings = parse_settings(
        {"prompts_dir": str(bundled_prompts())}, source="built-in defaults", base_dir=here
    )
    logging.getLogger("tally").info(
        "no config file (none named by --config or TALLY_CONFIG, no config.yaml in %s): running "
        "on built-in defaults, with the SQLite database data/tally.db, MEMORY.md and data/ in "
        "that directory; `tally init` writes a config.yaml and prompts/ to customise",
        here,
    )
    return settings


def parse_settings(raw: dict[str, Any], *, source: str, base_dir: Path) -> Settings:
    """The settings of `raw`; ConfigError naming every problem found, with the settings
    without the keys in error as its `partial` (for the checks that build runtimes)."""
    found = _validated(raw)
    if found.model is None:
        raise ConfigError(describe_problems(source, found.problems), problems=found.problems)
    found.model._source = source
    resolved = _resolve_paths(found.model, base_dir)
    problems = found.problems + tenant_override_problems(resolved, inherited=found.problems)
    if problems:
        message = describe_problems(source, problems)
        raise ConfigError(message, problems=problems, partial=resolved)
    return resolved


def _validated(raw: dict[str, Any], key_prefix: str = "") -> Validated[Settings]:
    """Every problem of `raw`: its values, then the names its models and bots use."""
    found = validate_collecting(Settings, raw, key_prefix)
    if found.model is None:
        return found
    if ("providers",) not in found.left_out:
        left_out = [str(loc[1]) for loc in found.left_out if loc[:1] == ("providers",)]
        found.problems += [key_prefix + p for p in reference_errors(found.model, left_out)]
    bots = bot_name_problems(found.model.channels, "channels.")
    found.problems += [key_prefix + p for p in bots]
    return found


def _validate(raw: dict[str, Any], source: str, key_prefix: str = "") -> Settings:
    found = _validated(raw, key_prefix)
    if found.model is None or found.problems:
        raise ConfigError(describe_problems(source, found.problems), problems=found.problems)
    return found.model


def _resolve_paths(settings: Settings, base_dir: Path) -> Settings:
    database = settings.database
    prefix = "sqlite+aiosqlite:///"
    if database.url.startswith(prefix) and not database.url.startswith(prefix + "/"):
        relative = database.url.removeprefix(prefix)
        database = DatabaseSettings(url=prefix + str(base_dir / relative))
    memory = settings.memory.model_copy(update={"path": str(base_dir / settings.memory.path)})
    return settings.model_copy(
        update={
            "database": database,
            "memory": memory,
            "prompts_dir": str(_prompts_dir(settings, base_dir)),
            "data_dir": str(base_dir / settings.data_dir),
        }
    )


def _prompts_dir(settings: Settings, base_dir: Path) -> Path:
    """`prompts_dir` as set; unset, the `prompts/` beside the config file when there is one,
    else the bundled prompts (so a config anywhere finds templates)."""
    if "prompts_dir" in settings.model_fields_set:
        return base_dir / settings.prompts_dir
    beside = base_dir / settings.prompts_dir
    return beside if beside.is_dir() else bundled_prompts()


# Sections a tenant may override (from config.yaml `tenants:` or the admin API). Paths, the
# memory store kind and the process's summarizer jobs stay the operator's: a tenant never names
# a file.
TENANT_SECTIONS = (
    "persona",
    "model",
    "summarizer",
    "memory",
    "tools",
    "compaction",
    "quotas",
    "channels",
)
OPERATOR_ONLY = {"memory": ("path", "store", "summarizer_jobs")}
# Set in config.yaml's `tenants:` only, never through the admin API: an MCP server's command
# runs on the operator's host.
FILE_ONLY = {"tools": ("mcp_servers",)}


def tenant_settings(
    base: Settings, tenant_id: str, overrides: dict[str, Any], *, is_from_file: bool = False
) -> Settings:
    """The effective settings of one tenant: `base` with `overrides` merged section by section,
    validated exactly like config.yaml. Errors name `tenants.<id>.<key>` in the config file
    (`is_from_file`), or the key alone for settings a tenant sent (which never see the file)."""
    source = base.source if is_from_file else f"tenant {tenant_id!r} settings"
    prefix = f"tenants.{tenant_id}." if is_from_file else ""
    problems = []
    for section, values in overrides.items():
        if section not in TENANT_SECTIONS:
            problems.append(f"{prefix}{section}: not a per-tenant setting")
        elif not isinstance(values, dict):
            problems.append(f"{prefix}{section}: must be a mapping")
        else:
            problems += [
                f"{prefix}{section}.{key}: set by the operator only"
                for key in OPERATOR_ONLY.get(section, ())
                if key in values
            ]
    if problems:
        raise ConfigError(describe_problems(source, problems), problems=problems)
    merged = base.model_dump()
    if tenant_id != DEFAULT_TENANT:  # bots belong to their tenant: the default's are its own
        merged["channels"] = {}
    for section, values in overrides.items():
        merged[section] = {**(merged.get(section) or {}), **values}
    merged["tenants"] = {}
    effective = _validate(merged, source, prefix)
    effective._source = base.source
    return effective


def layered_overrides(settings: Settings, tenant_id: str, stored: dict[str, Any]) -> dict[str, Any]:
    """A tenant's overrides from config.yaml with those set through the API over them, key by
    key within each section (a stored `tools.enabled` keeps the file's `tools.mcp_servers`)."""
    layered = dict(settings.tenants.get(tenant_id, {}))
    for section, values in stored.items():
        below = layered.get(section)
        if isinstance(below, dict) and isinstance(values, dict):
            values = {**below, **values}
        layered[section] = values
    return layered


def file_only_problems(overrides: dict[str, Any]) -> list[str]:
    """`key: reason` for each setting in `overrides` (sent through the API) that only
    config.yaml may set."""
    return [
        f"{section}.{key}: set in config.yaml by the operator only"
        for section, keys in FILE_ONLY.items()
        for key in keys
        if isinstance(overrides.get(section), dict) and key in overrides[section]
    ]


def tenant_override_problems(settings: Settings, *, inherited: Sequence[str] = ()) -> list[str]:
    """Every problem of config.yaml's `tenants:`, found at start-up so a bad override stops
    the server; not those `inherited` from the top-level settings, named there already."""
    problems = []
    for tenant_id, overrides in settings.tenants.items():
        if not TENANT_ID.fullmatch(tenant_id):
            problems.append(f"tenants.{tenant_id}: a tenant id is a lowercase slug")
            continue
        try:
            tenant_settings(settings, tenant_id, overrides, is_from_file=True)
        except ConfigError as exc:
            problems += [
                p for p in exc.problems if p.removeprefix(f"tenants.{tenant_id}.") not in inherited
            ]
    return problems
