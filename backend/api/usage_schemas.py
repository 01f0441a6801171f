"""The bodies of the usage routes: a tenant's own days, and every tenant's for the operator."""

from __future__ import annotations

from datetime import date

from pydantic import BaseModel, Field


class UsageDayPublic(BaseModel):
    tenant_id: str
    day: date
    turns: int
    prompt_tokens: int
    completion_tokens: int
    summarizer_tokens: int
    cached_tokens: int = Field(description="of prompt_tokens: read from the prompt cache")
    cache_write_tokens: int = Field(description="of prompt_tokens: written to the prompt cache")
    summarizer_calls: int = Field(description="ranges of evicted messages summarized")
    estimated_cost: float | None = Field(
        description="at config.yaml's `pricing` when each call was stored; null when no call "
        "of the day had a price"
    )
    unpriced_calls: int = Field(description="turns and summaries of a model without a price")


class UsageList(BaseModel):
    currency: str = Field(description="of estimated_cost (config.yaml `pricing.currency`)")
    days: list[UsageDayPublic]
