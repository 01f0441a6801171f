"""The `memory:` section of config.yaml: where memory is kept, when the overflow summarizer
writes it, and how a message finds what bears on it. `backend.settings` re-exports it."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from backend.settings.base import Strict


class AutoSummarizeSettings(Strict):
    min_messages: int = Field(30, ge=1)
    min_chars: int = Field(15_000, ge=1)


class EmbeddingSettings(Strict):
    """A provider's embeddings endpoint (an `openai_compatible` row of `providers:`)."""

    provider: str
    name: str
    dimensions: int | None = Field(None, ge=1, le=8192)  # for models that can shorten vectors


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
    # Summarizer jobs a process runs at once (the operator's: for every tenant). Each mostly
    # waits on its model; more wait their turn, so that a burst of sessions reaching their
    # automatic write together leaves the CPU to the turns.
    summarizer_jobs: int = Field(4, ge=1, le=256)
    # A range larger than this is summarized in parts; a message larger is cut in the prompt.
    summarizer_input_tokens: int = Field(8_000, ge=500)
    auto_summarize: AutoSummarizeSettings = AutoSummarizeSettings()
    # With `scope: user`, lines to remember about a person are proposed to them first and
    # written once confirmed; one unanswered for `confirm_expire_s` is dropped.
    confirm_writes: bool = False
    confirm_expire_s: float = Field(86_400.0, gt=0)
    # How a message finds the memory bearing on it (docs/memory.md): facts and archived turns
    # ranked by their words and, with embeddings, their meaning. `builtin`: an offline model
    # shipped in a package; `off`: words alone; or a provider's embeddings model.
    embeddings: Literal["builtin", "off"] | EmbeddingSettings = "builtin"
    search_archive: bool = True  # messages of the scope's other sessions and archived turns
    # When not all of memory fits prompt_budget_tokens: the share of it that the newest facts
    # take in the (cached) system prompt; the rest goes to what the message calls for.
    standing_share: float = Field(0.25, ge=0, le=1)
    # A session quiet this long has its undistilled tail distilled into memory; null: never.
    distill_quiet_after_s: float | None = Field(1800.0, gt=0)
