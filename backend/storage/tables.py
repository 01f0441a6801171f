"""The tables of docs/architecture.md (the schema). Every table carries `tenant_id`; every
lookup filters on it.

Schema changes go through the Alembic migrations in `storage/migrations/`; this module is the
description the repositories query against and must match the newest migration.
"""

from __future__ import annotations

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Column,
    Date,
    DateTime,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
    false,
)

metadata = MetaData()

# SQLite only autoincrements INTEGER PRIMARY KEY; PostgreSQL gets 64-bit ids.
Id = BigInteger().with_variant(Integer(), "sqlite")
Timestamp = DateTime(timezone=True)

tenants = Table(
    "tenants",
    metadata,
    Column("id", String(64), primary_key=True),
    Column("name", String(200), nullable=False),
    Column("settings", JSON, nullable=False, default=dict),
    Column("created_at", Timestamp, nullable=False),
    Column("disabled_at", Timestamp),
)

api_keys = Table(
    "api_keys",
    metadata,
    Column("id", String(32), primary_key=True),
    Column("tenant_id", String(64), ForeignKey("tenants.id"), nullable=False, index=True),
    Column("prefix", String(16), nullable=False, index=True),
    Column("hash", String(128), nullable=False),
    Column("scope", String(16), nullable=False),
    Column("label", String(200), nullable=False, default=""),
    Column("created_at", Timestamp, nullable=False),
    Column("last_used_at", Timestamp),
    Column("revoked_at", Timestamp),
)

sessions = Table(
    "sessions",
    metadata,
    Column("id", String(36), primary_key=True),
    Column("tenant_id", String(64), ForeignKey("tenants.id"), nullable=False),
    Column("channel", String(16), nullable=False),
    Column("external_key", String(200)),
    Column("user_key", String(200)),
    Column("title", String(200), nullable=False, default=""),
    Column("summary", Text, nullable=False, default=""),
    Column("window_start_id", Id, nullable=False, default=0),
    # The last message id distilled into memory: each message reaches memory exactly once.
    Column("memory_watermark_id", Id, nullable=False, default=0),
    Column("created_at", Timestamp, nullable=False),
    Column("updated_at", Timestamp, nullable=False),
    UniqueConstraint("tenant_id", "channel", "external_key", name="uq_sessions_external_key"),
    Index("ix_sessions_tenant_updated", "tenant_id", "updated_at"),
)

messages = Table(
    "messages",
    metadata,
    Column("id", Id, primary_key=True, autoincrement=True),
    Column("tenant_id", String(64), nullable=False),
    Column("session_id", String(36), ForeignKey("sessions.id", ondelete="CASCADE"), nullable=False),
    Column("role", String(16), nullable=False),
    Column("content", Text, nullable=False),
    # Text-only messages (nearly all) keep SQL NULL, not JSON's null: nothing to decode when a
    # window is read every turn (a row's decoding was a tenth of that read's CPU).
    Column("parts", JSON(none_as_null=True)),
    Column("turn_id", String(40), nullable=False),
    Column("status", String(16), nullable=False),
    Column("token_count", Integer),
    Column("idempotency_key", String(200)),
    Column("created_at", Timestamp, nullable=False),
    Column("compacted", Boolean, nullable=False, server_default=false()),  # its request was
    Column("thinking", Text),  # the model's reasoning before the reply
    # A user message whose turn failed: how (Tally's words, never the user's), until it is
    # answered after all.
    Column("failure_code", String(64)),
    Column("failure_message", Text),
    Index("ix_messages_tenant_session_id", "tenant_id", "session_id", "id"),
    Index("ix_messages_turn", "tenant_id", "turn_id"),
    UniqueConstraint("tenant_id", "idempotency_key", name="uq_messages_idempotency_key"),
    sqlite_autoincrement=True,  # ids are never reused, so id ranges stay meaningful
)

tool_conversations = Table(
    "tool_conversations",
    metadata,
    Column("id", Id, primary_key=True, autoincrement=True),
    Column("tenant_id", String(64), nullable=False),
    Column("session_id", String(36), ForeignKey("sessions.id", ondelete="CASCADE"), nullable=False),
    Column("message_id", Id, ForeignKey("messages.id", ondelete="SET NULL")),
    Column("turn_id", String(40), nullable=False),
    Column("tool_call_id", String(200), nullable=False),
    Column("tool_name", String(200), nullable=False),
    Column("arguments", JSON, nullable=False),
    Column("result", Text, nullable=False),
    Column("is_error", Boolean, nullable=False),
    Column("duration_ms", Integer, nullable=False),
    Column("user_message", Text, nullable=False),
    Column("timestamp", Timestamp, nullable=False),
    Index("ix_tool_conversations_tenant_session", "tenant_id", "session_id", "id"),
    Index("ix_tool_conversations_turn", "tenant_id", "turn_id"),
    sqlite_autoincrement=True,
)

memory_entries = Table(
    "memory_entries",
    metadata,
    Column("id", Id, primary_key=True, autoincrement=True),
    Column("tenant_id", String(64), nullable=False),
    Column("scope_key", String(200), nullable=False, default=""),
    Column("date", Date, nullable=False),
    Column("source", String(200), nullable=False),
    Column("content", Text, nullable=False),
    Column("session_id", String(36)),
    Column("first_message_id", Id),
    Column("last_message_id", Id),
    Column("created_at", Timestamp, nullable=False),
    Index("ix_memory_entries_tenant_scope", "tenant_id", "scope_key", "id"),
    sqlite_autoincrement=True,
)

overflow_jobs = Table(
    "overflow_jobs",
    metadata,
    Column("id", Id, primary_key=True, autoincrement=True),
    Column("tenant_id", String(64), nullable=False),
    Column("session_id", String(36), nullable=False),
    Column("scope_key", String(200), nullable=False, default=""),
    Column("origin", String(200)),  # where its turns were said (`origin_of`), for its line
    # "overflow": evict a range, update the summary, remember what is new;
    # "auto": the automatic memory write, which evicts nothing.
    Column("kind", String(16), nullable=False),
    Column("first_message_id", Id, nullable=False),
    Column("last_message_id", Id, nullable=False),
    Column("next_start_id", Id, nullable=False),
    Column("memory_from_id", Id, nullable=False),
    # pending -> summarized -> memory_written -> done (or reverted)
    Column("status", String(16), nullable=False),
    Column("previous_summary", Text),
    Column("summary", Text),
    Column("memory_line", Text),
    Column("memory_entry_id", String(64)),
    Column("memory_supersedes", Text),  # entry ids the memory line replaces, comma-separated
    Column("attempts", Integer, nullable=False, default=0),
    Column("last_error", Text),
    Column("next_attempt_at", Timestamp),
    Column("leased_until", Timestamp),
    Column("created_at", Timestamp, nullable=False),
    Column("updated_at", Timestamp, nullable=False),
    UniqueConstraint(
        "tenant_id", "session_id", "kind", "first_message_id", name="uq_overflow_range"
    ),
    Index("ix_overflow_jobs_status", "status"),
    Index("ix_overflow_jobs_session", "tenant_id", "session_id", "id"),
    sqlite_autoincrement=True,
)

usage = Table(
    "usage",
    metadata,
    Column("tenant_id", String(64), primary_key=True),
    Column("day", Date, primary_key=True),
    Column("turns", Integer, nullable=False, default=0),
    Column("prompt_tokens", BigInteger, nullable=False, default=0),
    Column("completion_tokens", BigInteger, nullable=False, default=0),
    Column("summarizer_tokens", BigInteger, nullable=False, default=0),
    # Of prompt_tokens: read from the vendor's prompt cache, and written to it (Anthropic).
    Column("cached_tokens", BigInteger, nullable=False, default=0, server_default="0"),
    Column("cache_write_tokens", BigInteger, nullable=False, default=0, server_default="0"),
    Column("summarizer_calls", Integer, nullable=False, default=0, server_default="0"),
    # Estimated at the prices configured when each call was stored (config.yaml `pricing`).
    Column("cost_micros", BigInteger, nullable=False, default=0, server_default="0"),
    Column("unpriced_calls", Integer, nullable=False, default=0, server_default="0"),
)

# What a chat platform delivered, kept before it is acknowledged (the webhook's 200, the
# polling offset), so an update the platform was told we have is never lost and is answered
# once: (tenant, bot, platform id) is unique.
channel_updates = Table(
    "channel_updates",
    metadata,
    Column("id", Id, primary_key=True, autoincrement=True),
    Column("tenant_id", String(64), nullable=False),
    Column("bot", String(64), nullable=False),
    Column("platform_id", String(200), nullable=False),  # Telegram's update_id, DingTalk's msgId
    Column("payload", JSON, nullable=False),
    # received -> answered | ignored | failed
    Column("status", String(16), nullable=False),
    Column("chunks_sent", Integer, nullable=False, default=0),  # of the reply, after a crash
    Column("error", Text),
    Column("received_at", Timestamp, nullable=False),
    Column("finished_at", Timestamp),
    Column("leased_until", Timestamp),  # while a process answers it (renewed), then free
    UniqueConstraint("tenant_id", "bot", "platform_id", name="uq_channel_update"),
    Index("ix_channel_updates_open", "tenant_id", "bot", "status"),
    sqlite_autoincrement=True,
)

# One person's identities across channels (`telegram:<id>`, `dingtalk:<staff>`, a tenant's own
# user key): with `memory.scope: user`, every identity of a person reads and writes the memory
# of `person:<person_id>`. An identity belongs to at most one person of its tenant.
identity_links = Table(
    "identity_links",
    metadata,
    Column("tenant_id", String(64), primary_key=True),
    Column("user_key", String(200), primary_key=True),
    Column("person_id", String(32), nullable=False),
    Column("linked_at", Timestamp, nullable=False),
    Index("ix_identity_links_person", "tenant_id", "person_id"),
)

# One-time codes that link the identity that asked for one with the identity that sends it
# back: single use, short-lived, valid only inside their tenant. Only a hash is kept.
link_codes = Table(
    "link_codes",
    metadata,
    Column("code_hash", String(64), primary_key=True),
    Column("tenant_id", String(64), nullable=False),
    Column("user_key", String(200), nullable=False),  # who asked for it
    Column("created_at", Timestamp, nullable=False),
    Column("expires_at", Timestamp, nullable=False),
    Column("used_at", Timestamp),
)

# Memory to move into a person's when identities are linked: journaled with the link, in its
# transaction, and removed once moved, so a crash or a memory fault in between delays the move
# (it is done at the next start or link) but never loses it.
memory_moves = Table(
    "memory_moves",
    metadata,
    Column("id", Id, primary_key=True, autoincrement=True),
    Column("tenant_id", String(64), nullable=False),
    Column("from_scope", String(200), nullable=False),
    Column("into_scope", String(200), nullable=False),
    Column("created_at", Timestamp, nullable=False),
    Column("claimed_until", Timestamp),  # while a process moves it: one at a time
    sqlite_autoincrement=True,
)

# Memory lines proposed to a person (`memory.confirm_writes`): written into memory only once
# the person approves. A summarizer's proposal carries its range, once per overflow job (a job
# retried after a crash proposes once; a range distilled again after a revert is a new job).
pending_memory = Table(
    "pending_memory",
    metadata,
    Column("id", Id, primary_key=True, autoincrement=True),
    Column("tenant_id", String(64), nullable=False),
    Column("user_key", String(200), nullable=False),  # the identity it was said by
    Column("session_id", String(36), nullable=False),
    Column("job_id", BigInteger),  # the overflow job that proposed it; None: memory_write
    Column("source", String(200), nullable=False),  # the kind: auto-overflow, telegram:..., ...
    Column("content", Text, nullable=False),
    Column("first_message_id", BigInteger),  # with the last: a summarizer's range
    Column("last_message_id", BigInteger),
    # pending -> approved (-> written) | discarded | expired
    Column("status", String(16), nullable=False),
    Column("created_at", Timestamp, nullable=False),
    Column("expires_at", Timestamp, nullable=False),
    Column("decided_at", Timestamp),
    Column("written_at", Timestamp),  # into memory, after the approval
    Column("announced_at", Timestamp),  # asked in the person's chat
    UniqueConstraint("job_id", name="uq_pending_job"),
    Index("ix_pending_memory_user", "tenant_id", "user_key", "status"),
    sqlite_autoincrement=True,
)

# What administrators did (docs/tenants.md, the audit log): who (the operator, or an admin key
# by label and id), what, to which tenant, when. Never a secret: a key is named by its id.
audit_log = Table(
    "audit_log",
    metadata,
    Column("id", Id, primary_key=True, autoincrement=True),
    Column("tenant_id", String(64), nullable=False),  # the tenant acted on
    Column("actor", String(300), nullable=False),
    Column("action", String(64), nullable=False),  # tenant.create, key.revoke, ...
    Column("target", String(200), nullable=False, default=""),  # a key id, a user key
    Column("detail", JSON, nullable=False, default=dict),
    Column("created_at", Timestamp, nullable=False),
    Index("ix_audit_log_tenant", "tenant_id", "id"),
    sqlite_autoincrement=True,
)

# Long administrative operations (re-summarize a tenant's memory, export it): the console
# polls their progress from any worker. `result` holds an export's document once done.
admin_operations = Table(
    "admin_operations",
    metadata,
    Column("id", String(32), primary_key=True),
    Column("tenant_id", String(64), nullable=False),
    Column("kind", String(32), nullable=False),  # resummarize, export
    Column("state", String(16), nullable=False),  # running, done, failed
    Column("done", Integer, nullable=False, default=0),
    Column("total", Integer, nullable=False, default=0),
    Column("message", Text, nullable=False, default=""),
    Column("result", JSON, nullable=True),
    Column("created_at", Timestamp, nullable=False),
    Column("updated_at", Timestamp, nullable=False),
    Column("finished_at", Timestamp, nullable=True),
    Index("ix_admin_operations_tenant", "tenant_id", "created_at"),
)

# The vectors memory is ranked by meaning with (backend/retrieval), one per item and embedding
# model, so each text is embedded once: a fact by its text within its memory scope (`f:<hash>`),
# a message by its id (`m:<id>`, gone with the message). `vector` is normalised float32.
memory_vectors = Table(
    "memory_vectors",
    metadata,
    Column("id", Id, primary_key=True, autoincrement=True),
    Column("tenant_id", String(64), nullable=False),
    Column("scope_key", String(200), nullable=False, default="", server_default=""),
    Column("model", String(120), nullable=False),
    Column("item", String(80), nullable=False),
    Column("message_id", Id, ForeignKey("messages.id", ondelete="CASCADE")),
    Column("vector", LargeBinary, nullable=False),
    Column("created_at", Timestamp, nullable=False),
    UniqueConstraint("tenant_id", "model", "scope_key", "item", name="uq_memory_vectors_item"),
    Index("ix_memory_vectors_message", "message_id"),
    sqlite_autoincrement=True,
)
