"""`config.yaml`, parsed once and strictly into typed settings.

An unknown key or a bad value stops start-up with the file, the key path and the reason.
Secrets never live in the file: a provider names the environment variable holding its key.
"""

from __future__ import annotations

import ipaddress
import logging
import os
import re
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import (
    Field,
    PrivateAttr,
    ValidationError,
    field_validator,
)

from backend.channel_settings import ChannelSettings, bot_name_problems
from backend.coordination_settings import CoordinationSettings
from backend.domain.hosts import host_name
from backend.errors import ConfigError
from backend.pricing import PricingSettings
from backend.provider_settings import ModelRef as ModelRef
from backend.provider_settings import ModelSettings as ModelSettings
from backend.provider_settings import ProviderSettings as ProviderSettings
from backend.resources import prompts_dir as bundled_prompts
from backend.settings_base import Strict
from backend.settings_errors import describe_problems, describe_validation_error
from backend.storage.database import Pools
from backend.tool_settings import ToolSettings as ToolSettings

DEFAULT_CONFIG = Path("config.yaml")


def _is_host_name(name: str) -> bool:
    return host_name(name[2:] if name.startswith("*.") else name) is not None


class ServerSettings(Strict):
    host: str = "127.0.0.1"
    port: int = Field(8000, ge=0, le=65535)
    max_message_chars: int = Field(100_000, ge=1)
    max_body_bytes: int = Field(8 * 1024 * 1024, ge=1024)
    max_header_bytes: int = Field(32 * 1024, ge=1024)
    max_headers: int = Field(100, ge=10)
    # None: loopback names with auth.mode none, any host with keys. "*" allows any.
    allowed_hosts: list[str] | None = None
    public_docs: bool | None = None  # None: on with auth.mode none, off with keys
    sse_keepalive_s: float = Field(15.0, gt=0, le=300)  # a comment on a quiet stream
    # How long a streaming turn whose client went away runs on for a reconnect (Last-Event-ID)
    # before it is cancelled; 0 cancels it at once.
    sse_resume_s: float = Field(10.0, ge=0, le=300)

    @field_validator("allowed_hosts")
    @classmethod
    def _host_names(cls, hosts: list[str] | None) -> list[str] | None:
        if hosts is not None and any(h != "*" and not _is_host_name(h) for h in hosts):
            raise ValueError('host names only (example.com, *.example.com, [::1]) or "*"')
        return hosts

    @property
    def is_loopback(self) -> bool:
        if self.host == "localhost":
            return True
        try:
            return ipaddress.ip_address(self.host).is_loopback
        except ValueError:
            return False


class AuthSettings(Strict):
    mode: Literal["none", "keys"] = "none"
    revocation_check_s: float = Field(5.0, gt=0, le=3600)  # how often a turn re-checks its key


POOLS = Pools()  # the defaults


class DatabaseSettings(Strict):
    """Where data lives. The pool sizes matter on PostgreSQL only: a worker holds at most
    `pool_size + max_overflow + lock_pool_size + lock_max_overflow` connections."""

    url: str = "sqlite+aiosqlite:///data/tally.db"
    pool_size: int = Field(POOLS.size, ge=1, le=1000)
    max_overflow: int = Field(POOLS.max_overflow, ge=0, le=1000)
    pool_timeout_s: float = Field(
        POOLS.timeout_s, gt=0, le=600
    )  # waited for a connection, then 503
    # Connections that hold a session's advisory lock for a whole turn, one per turn running;
    # a turn beyond them waits for one to be free (turns end), then 503.
    lock_pool_size: int = Field(POOLS.lock_size, ge=1, le=1000)
    lock_max_overflow: int = Field(POOLS.lock_max_overflow, ge=0, le=1000)
    lock_pool_timeout_s: float = Field(POOLS.lock_timeout_s, gt=0, le=3600)
    processes: int = Field(1, ge=1, le=1000)  # workers on this database, all hosts together

    @property
    def connections_per_process(self) -> int:
        return self.pool_size + self.max_overflow + self.lock_pool_size + self.lock_max_overflow

    @field_validator("url")
    @classmethod
    def _supported(cls, url: str) -> str:
        if not url.startswith(("sqlite+aiosqlite://", "postgresql+asyncpg://")):
            raise ValueError("use sqlite+aiosqlite:///PATH or postgresql+asyncpg://...")
        return url


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
    # A summarizer job's lease, renewed while it runs: a crashed worker's job is taken over
    # after at most this long.
    lease_s: float = Field(30.0, ge=1, le=600)
    # Failed summaries of a range before it is kept as a raw line (its identifiers and where it
    # is) for `tally memory resummarize`: the window moves on, nothing is silently lost.
    max_summary_attempts: int = Field(6, ge=1, le=100)
    # A range larger than this is summarized in parts; a message larger is cut in the prompt.
    summarizer_input_tokens: int = Field(8_000, ge=500)
    auto_summarize: AutoSummarizeSettings = AutoSummarizeSettings()
    # With `scope: user`, lines to remember about a person are proposed to them first and
    # written once confirmed; one unanswered for `confirm_expire_s` is dropped.
    confirm_writes: bool = False
    confirm_expire_s: float = Field(86_400.0, gt=0)


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
    channels: dict[str, ChannelSettings] = Field(default_factory=dict)  # the default tenant's
    tenants: dict[str, dict[str, Any]] = Field(default_factory=dict)
    prompts_dir: str = "prompts"
    data_dir: str = "data"

    # The file these settings came from, named in every configuration error found later.
    _source: str = PrivateAttr(default="config")

    @property
    def source(self) -> str:
        return self._source


def reference_errors(settings: Settings) -> list[str]:
    """`key.path: reason` for each model that names a provider not defined under `providers`."""
    refs: list[tuple[str, str | None]] = []
    if settings.model is not None:
        refs.append(("model.provider", settings.model.provider))
        refs += [
            (f"model.fallbacks.{index}.provider", fallback.provider)
            for index, fallback in enumerate(settings.model.fallbacks)
        ]
    refs.append(("summarizer.provider", settings.summarizer.provider))
    defined = ", ".join(settings.providers) or "none"
    return [
        f"{key}: provider {name!r} is not defined under providers: (defined: {defined})"
        for key, name in refs
        if name is not None and name not in settings.providers
    ]


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
    settings = _validate(raw, source)
    settings._source = source
    resolved = _resolve_paths(settings, base_dir)
    check_tenant_overrides(resolved)
    return resolved


def _validate(raw: dict[str, Any], source: str, key_prefix: str = "") -> Settings:
    try:
        settings = Settings.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(
            describe_validation_error(source, exc, key_prefix, root=Settings)
        ) from exc
    problems = reference_errors(settings) + bot_name_problems(settings.channels, "channels.")
    if problems:
        raise ConfigError(describe_problems(source, [key_prefix + p for p in problems]))
    return settings


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
DEFAULT_TENANT = "default"
OPERATOR_ONLY = {"memory": ("path", "store")}
# Set in config.yaml's `tenants:` only, never through the admin API: an MCP server's command
# runs on the operator's host.
FILE_ONLY = {"tools": ("mcp_servers",)}
TENANT_ID = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}")


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
        raise ConfigError(describe_problems(source, problems))
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


def check_tenant_overrides(settings: Settings) -> None:
    """Validate config.yaml's `tenants:` at start-up, so a bad override stops the server."""
    for tenant_id, overrides in settings.tenants.items():
        if not TENANT_ID.fullmatch(tenant_id):
            problem = f"tenants.{tenant_id}: a tenant id is a lowercase slug"
            raise ConfigError(describe_problems(settings.source, [problem]))
        tenant_settings(settings, tenant_id, overrides, is_from_file=True)
