"""`config.yaml`, parsed once and strictly into typed settings.

An unknown key or a bad value stops start-up with the file, the key path and the reason.
Secrets never live in the file: a provider names the environment variable holding its key.
"""

from __future__ import annotations

import logging
import os
import re
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from backend.errors import ConfigError
from backend.resources import prompts_dir as bundled_prompts

DEFAULT_CONFIG = Path("config.yaml")
_ENV_REF = re.compile(r"^\$\{([A-Za-z_][A-Za-z0-9_]*)\}$")


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ServerSettings(Strict):
    host: str = "127.0.0.1"
    port: int = Field(8000, ge=0, le=65535)
    max_message_chars: int = Field(100_000, ge=1)
    max_body_bytes: int = Field(8 * 1024 * 1024, ge=1024)


class AuthSettings(Strict):
    mode: Literal["none", "keys"] = "none"


class DatabaseSettings(Strict):
    url: str = "sqlite+aiosqlite:///data/tally.db"

    @field_validator("url")
    @classmethod
    def _supported(cls, url: str) -> str:
        if not url.startswith(("sqlite+aiosqlite://", "postgresql+asyncpg://")):
            raise ValueError("use sqlite+aiosqlite:///PATH or postgresql+asyncpg://...")
        return url


class ProviderSettings(Strict):
    """One vendor endpoint. Vendors are rows like this one, not classes."""

    kind: Literal["openai_compatible", "anthropic", "scripted"]
    base_url: str | None = None
    api_key_env: str | None = None
    timeout_s: float = Field(60.0, gt=0)
    connect_timeout_s: float = Field(10.0, gt=0)
    max_retries: int = Field(2, ge=0, le=10)
    max_retry_wait_s: float = Field(30.0, ge=0)
    replies: list[str] = Field(default_factory=list)  # scripted only: replies to cycle through

    @field_validator("api_key_env")
    @classmethod
    def _env_name(cls, value: str | None) -> str | None:
        if value is None:
            return None
        match = _ENV_REF.match(value)
        name = match.group(1) if match else value
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            raise ValueError("name an environment variable, e.g. OPENAI_API_KEY")
        return name

    def api_key(self) -> str | None:
        return os.environ.get(self.api_key_env) if self.api_key_env else None


class ModelSettings(Strict):
    provider: str
    name: str
    context_window: int = Field(128_000, ge=256)
    max_output_tokens: int = Field(4096, ge=1)
    temperature: float | None = Field(None, ge=0, le=2)
    supports_vision: bool = True  # false: images are kept in storage but not sent
    fallbacks: list[ModelRef] = Field(default_factory=list)


class ModelRef(Strict):
    provider: str
    name: str


class SummarizerSettings(Strict):
    provider: str | None = None
    name: str | None = None


class PersonaSettings(Strict):
    name: str = "Tally"
    language: Literal["en", "zh"] = "en"
    max_history_messages: int = Field(50, ge=-1)
    system_template: str = "system.md.j2"

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


class AutoSummarizeSettings(Strict):
    min_messages: int = Field(30, ge=1)
    min_chars: int = Field(15_000, ge=1)


class MemorySettings(Strict):
    store: Literal["file", "database"] = "file"
    path: str = "MEMORY.md"
    scope: Literal["tenant", "user"] = "tenant"
    overflow_batch: int = Field(10, ge=1)
    delete_evicted: bool = False
    prompt_budget_tokens: int = Field(2000, ge=0)
    retry_base_s: float = Field(2.0, gt=0)  # first backoff of a failed summary; doubles, max 300 s
    auto_summarize: AutoSummarizeSettings = AutoSummarizeSettings()


class CompactionSettings(Strict):
    normal_ratio: float = Field(0.70, gt=0, le=1)
    emergency_ratio: float = Field(0.95, gt=0, le=1)


class ToolSettings(Strict):
    enabled: list[str] = Field(default_factory=lambda: ["memory_search", "memory_write", "now"])
    max_tool_iterations: int = Field(8, ge=1, le=64)
    timeout_s: float = Field(30.0, gt=0)


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
    tenants: dict[str, dict[str, Any]] = Field(default_factory=dict)
    prompts_dir: str = "prompts"
    data_dir: str = "data"

    @model_validator(mode="after")
    def _providers_exist(self) -> Settings:
        refs: list[ModelSettings | ModelRef | SummarizerSettings] = []
        if self.model is not None:
            refs = [self.model, *self.model.fallbacks]
        if self.summarizer.provider is not None:
            refs.append(self.summarizer)
        for ref in refs:
            if ref.provider not in self.providers:
                raise ValueError(f"provider {ref.provider!r} is not defined under providers:")
        return self


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
    try:
        settings = Settings.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(describe_validation_error(source, exc)) from exc
    resolved = _resolve_paths(settings, base_dir)
    check_tenant_overrides(resolved)
    return resolved


def describe_validation_error(source: str, exc: ValidationError) -> str:
    lines = [f"{source}: invalid configuration"]
    for error in exc.errors():
        key = ".".join(str(part) for part in error["loc"]) or "(top level)"
        reason = "unknown key" if error["type"] == "extra_forbidden" else error["msg"]
        lines.append(f"  {key}: {reason}")
    return "\n".join(lines)


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


# Sections a tenant may override (from config.yaml `tenants:` or the admin API). Paths and the
# memory store kind stay the operator's: a tenant never names a file.
TENANT_SECTIONS = ("persona", "model", "summarizer", "memory", "tools", "compaction", "quotas")
OPERATOR_ONLY = {"memory": ("path", "store")}
TENANT_ID = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}")


def tenant_settings(base: Settings, tenant_id: str, overrides: dict[str, Any]) -> Settings:
    """The effective settings of one tenant: `base` with `overrides` merged section by section,
    validated exactly like config.yaml."""
    source = f"tenants.{tenant_id}"
    for section, values in overrides.items():
        if section not in TENANT_SECTIONS:
            raise ConfigError(f"{source}.{section}: not a per-tenant setting")
        if not isinstance(values, dict):
            raise ConfigError(f"{source}.{section}: must be a mapping")
        for key in OPERATOR_ONLY.get(section, ()):
            if key in values:
                raise ConfigError(f"{source}.{section}.{key}: set by the operator only")
    merged = base.model_dump()
    for section, values in overrides.items():
        merged[section] = {**(merged.get(section) or {}), **values}
    merged["tenants"] = {}
    try:
        return Settings.model_validate(merged)
    except ValidationError as exc:
        raise ConfigError(describe_validation_error(source, exc)) from exc


def check_tenant_overrides(settings: Settings) -> None:
    """Validate config.yaml's `tenants:` at start-up, so a bad override stops the server."""
    for tenant_id, overrides in settings.tenants.items():
        if not TENANT_ID.fullmatch(tenant_id):
            raise ConfigError(f"tenants.{tenant_id}: a tenant id is a lowercase slug")
        tenant_settings(settings, tenant_id, overrides)
