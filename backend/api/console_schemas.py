"""Bodies of the routes the operator's console adds to the admin API: a tenant's settings key
by key, bot restarts, memory health per tenant, and long operations with their progress."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field

from backend.api.health_schemas import MemoryProblemPublic
from backend.api.schemas import Body


class SettingFieldPublic(BaseModel):
    key: str = Field(description="section.key, as in config.yaml")
    value: Any = Field(description="the effective value")
    origin: Literal["default", "file", "api"] = Field(
        description="set through the admin API, in config.yaml, or Tally's default"
    )
    file_value: Any = Field(None, description="what config.yaml says, when it says anything")
    kind: Literal["int", "str", "bool", "choice"]
    choices: list[Any] | None = None
    nullable: bool = False


class TenantSettingsPublic(BaseModel):
    tenant_id: str
    fields: list[SettingFieldPublic]


class TenantSettingsUpdate(Body):
    values: dict[str, Any] = Field(
        description="section.key: value; null drops the value set through the API"
    )


class TenantMemoryHealthPublic(BaseModel):
    tenant_id: str
    scope: Literal["tenant", "user"]
    memories: int = Field(description="the tenant's memory, or one per person (scope user)")
    lines: int | None = Field(description="lines in all of them; null: one cannot be read")
    last_compaction_at: datetime | None = Field(
        description="when the summarizer last finished distilling evicted turns"
    )
    status: Literal["ok", "degraded"]
    problems: list[MemoryProblemPublic]


class MemoryHealthList(BaseModel):
    tenants: list[TenantMemoryHealthPublic]


class OperationCreate(Body):
    kind: Literal["resummarize", "export"]


class OperationPublic(BaseModel):
    id: str
    tenant_id: str
    kind: Literal["resummarize", "export"]
    state: Literal["running", "done", "failed", "stalled"] = Field(
        description="stalled: running, but its process stopped reporting progress"
    )
    done: int
    total: int
    message: str
    created_at: datetime
    finished_at: datetime | None
    result_url: str | None = Field(description="an export's document, once done")


class OperationList(BaseModel):
    operations: list[OperationPublic]
