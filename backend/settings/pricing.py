"""What a model call is estimated to cost: config.yaml's `pricing`, per model, in the
operator's currency per million tokens. Costs are kept in millionths of the currency (a token
count times a price per million tokens is exactly that), added up in the usage table as each
call is stored, at the prices then configured."""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import Field

from backend.domain.messages import Usage
from backend.settings.base import Strict


class ModelPrice(Strict):
    input: float = Field(ge=0)  # a prompt token neither read from nor written to the cache
    output: float = Field(ge=0)
    cached_input: float | None = Field(None, ge=0)  # read from the cache; none: `input`
    cache_write: float | None = Field(None, ge=0)  # written to the cache; none: `input`


class PricingSettings(Strict):
    currency: str = Field("USD", min_length=1, max_length=8)
    models: dict[str, ModelPrice] = Field(default_factory=dict)  # by the model's name


@dataclass(frozen=True, slots=True)
class Charge:
    cost_micros: int = 0  # millionths of the currency
    unpriced_calls: int = 0  # calls of a model the table has no price for (not in the cost)


def charge(pricing: PricingSettings, model: str, usage: Usage) -> Charge:
    """The estimated cost of one call (or turn) of `model` that used `usage`."""
    price = pricing.models.get(model)
    if price is None:
        return Charge(unpriced_calls=1)
    fresh = usage.prompt_tokens - usage.cached_tokens - usage.cache_write_tokens
    cached = price.input if price.cached_input is None else price.cached_input
    written = price.input if price.cache_write is None else price.cache_write
    micros = (
        max(fresh, 0) * price.input
        + usage.cached_tokens * cached
        + usage.cache_write_tokens * written
        + usage.completion_tokens * price.output
    )
    return Charge(cost_micros=round(micros))
