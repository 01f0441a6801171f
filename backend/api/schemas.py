"""Request and response bodies of the HTTP API (separate create, update and public shapes)."""

from __future__ import annotations

from datetime import date, datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from backend.api.text_fields import EndUser, Text, Title


class Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Decision(Body):
    """A body that authorises something (approves a call, disables a tenant, gives a scope):
    strictly typed, so only `true` means yes (`"yes"`, `1` or `"true"` are 422, not a yes) and
    an id is a string, never a number taken for one."""

    model_config = ConfigDict(extra="forbid", strict=True)


class SessionCreate(Body):
    title: Title = ""
    channel: Literal["web", "api"] = "api"
    user: EndUser | None = None  # the end user whose session (and memory) this is


class SessionUpdate(Body):
    title: Title


class SummaryUpdate(Body):
    summary: Annotated[Text, Field(max_length=50_000)]


class SessionPublic(BaseModel):
    id: str
    title: str
    channel: str
    user: str | None = None  # the end user it belongs to, when the client named one
    summary: str
    window_start_id: int
    created_at: datetime
    updated_at: datetime


class SessionList(BaseModel):
    sessions: list[SessionPublic]
    total: int


class TextPartIn(Body):
    type: Literal["text"]
    text: str


class ImagePartIn(Body):
    type: Literal["image"]
    media_type: Literal["image/png", "image/jpeg", "image/gif", "image/webp"]
    data: str = Field(description="base64-encoded image bytes")


ContentPartIn = Annotated[TextPartIn | ImagePartIn, Field(discriminator="type")]


class SendRequest(Body):
    session_id: str | None = None
    message: str | list[ContentPartIn]
    stream: bool = False
    # The end user: a new session is theirs; a named session must be theirs already.
    user: EndUser | None = None


class ImagePublic(BaseModel):
    media_type: str
    data: str


class TurnFailurePublic(BaseModel):
    code: str
    message: str


class MessagePublic(BaseModel):
    id: int
    role: Literal["user", "assistant"]
    content: str
    turn_id: str
    status: Literal["complete", "incomplete"]
    created_at: datetime
    images: list[ImagePublic] = []
    is_archived: bool = False
    compacted: bool = False  # a reply answered from a request compacted to fit the context
    thinking: str = ""  # a reply's reasoning, when the model streamed any
    failure: TurnFailurePublic | None = None  # a user message whose turn failed, until answered
    retry_key: str | None = None  # with a failure: the Idempotency-Key that resumes the turn


class MessageList(BaseModel):
    messages: list[MessagePublic]
    window_start_id: int
    has_more: bool


class ToolCallPublic(BaseModel):
    tool_call_id: str
    tool_name: str
    arguments: dict[str, object]
    result: str
    is_error: bool
    duration_ms: int


class ToolConversationPublic(ToolCallPublic):
    id: int
    message_id: int | None
    turn_id: str
    user_message: str
    timestamp: datetime


class ToolConversationList(BaseModel):
    tool_conversations: list[ToolConversationPublic]


class UsagePublic(BaseModel):
    prompt_tokens: int = Field(description="every prompt token, cached ones included")
    completion_tokens: int
    cached_tokens: int = Field(description="of prompt_tokens: read from the prompt cache")
    cache_write_tokens: int = Field(description="of prompt_tokens: written to the prompt cache")


class SendResponse(BaseModel):
    session_id: str
    turn_id: str
    reply: str
    user_message_id: int
    assistant_message_id: int
    tool_calls: list[ToolCallPublic]
    usage: UsagePublic
    context_tokens: int = Field(description="the request's size in tokens")
    context_budget: int = Field(description="the model's context window minus its reply")
    memory_problem: str | None = Field(None, description="why memory did not work this turn")


class CancelResponse(BaseModel):
    cancelled: bool


class ApprovalRequest(Decision):
    """A person's decision on a tool call the turn's `tool.approval` event asked about."""

    tool_call_id: str = Field(min_length=1, max_length=200)
    approved: bool


class ApprovalResponse(BaseModel):
    tool_call_id: str
    approved: bool


class ErrorDetail(BaseModel):
    code: str
    message: str


class ErrorBody(BaseModel):
    error: ErrorDetail


class MemoryUpdate(Body):
    content: Annotated[Text, Field(max_length=5_000_000)]


class MemoryEntryCreate(Body):
    content: Text = Field(
        description="the fact, one line: line breaks and `|` are neutralised; "
        "at most 2,000 characters, no NUL"
    )


class ProvenancePublic(BaseModel):
    session_id: str
    first_message_id: int
    last_message_id: int


class MemoryEntryPublic(BaseModel):
    id: str
    date: date
    source: str  # what wrote it: manual, auto-overflow, ..., or where the model saved it
    origin: str | None = None  # a summarizer's line: where its turns were said (web, telegram:…)
    content: str
    provenance: ProvenancePublic | None
    replaces: list[str] = []  # ids of the entries this one replaced (a fact that changed)
    is_current: bool = True  # false: a later entry replaced it; the model is not told it


class MemoryPublic(BaseModel):
    content: str
    entries: list[MemoryEntryPublic]
    invalid_lines: list[str]


class MemoryEntryList(BaseModel):
    entries: list[MemoryEntryPublic]


class RevertResponse(BaseModel):
    session_id: str
    returned_to_window: bool  # else the turns are being distilled into memory again


class TenantCreate(Body):
    id: Annotated[str, Field(min_length=1, max_length=64)]
    name: Title = ""
    settings: dict[str, Any] = Field(default_factory=dict)


class TenantUpdate(Decision):
    name: Title | None = None
    settings: dict[str, Any] | None = None
    disabled: bool | None = None


class TenantPublic(BaseModel):
    id: str
    name: str
    settings: dict[str, Any]
    created_at: datetime
    disabled_at: datetime | None
    last_key_created_at: datetime | None = None  # when its newest API key was made


class TenantList(BaseModel):
    tenants: list[TenantPublic]
    # The operator manages every tenant (create, settings, disable); a tenant's admin key, its
    # own tenant's keys, usage, memory and audit log: the console offers only what it may do.
    is_operator: bool = False


class KeyCreate(Decision):
    scope: Literal["chat", "admin"] = "chat"
    label: Title = ""


class KeyPublic(BaseModel):
    id: str
    tenant_id: str
    prefix: str
    scope: str
    label: str
    created_at: datetime
    last_used_at: datetime | None
    revoked_at: datetime | None


class KeyCreated(KeyPublic):
    key: str = Field(description="the API key itself: shown once, never stored")


class KeyList(BaseModel):
    keys: list[KeyPublic]


class AuditEntryPublic(BaseModel):
    id: int
    tenant_id: str
    actor: str  # "operator", or "admin key <label> (<key id>)"
    action: str  # tenant.create, tenant.update, tenant.disable, tenant.enable, key.create, ...
    target: str
    detail: dict[str, Any]
    created_at: datetime


class AuditList(BaseModel):
    entries: list[AuditEntryPublic]
