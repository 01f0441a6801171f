"""Provider kinds as a table, and the chain (retries, fallbacks) a configured model runs on.

SDKs are imported inside the factories, so importing the registry costs nothing and a missing
optional SDK only matters to the kind that needs it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from backend.errors import ConfigError
from backend.providers.base import ChatProvider
from backend.providers.outcomes import ProviderOutcomes, RecordedProvider
from backend.providers.resilience import FallbackProvider, RetryingProvider
from backend.settings import ModelSettings, ProviderSettings

ProviderFactory = Callable[[str, ProviderSettings], ChatProvider]


def _openai_compatible(name: str, settings: ProviderSettings) -> ChatProvider:
    from backend.providers.openai_compatible import OpenAICompatibleProvider

    return OpenAICompatibleProvider(name, settings)


def _anthropic(name: str, settings: ProviderSettings) -> ChatProvider:
    from backend.providers.anthropic import AnthropicProvider

    return AnthropicProvider(name, settings)


def _scripted(name: str, settings: ProviderSettings) -> ChatProvider:
    from backend.providers.scripted import ScriptedProvider

    return ScriptedProvider(name, settings.replies)


PROVIDER_KINDS: dict[str, ProviderFactory] = {
    "openai_compatible": _openai_compatible,
    "anthropic": _anthropic,
    "scripted": _scripted,
}


def build_provider(name: str, settings: ProviderSettings) -> ChatProvider:
    """The bare adapter for the provider configured as `name`."""
    factory = PROVIDER_KINDS.get(settings.kind)
    if factory is None:
        raise ConfigError(f"providers.{name}.kind: unknown provider kind {settings.kind!r}")
    return factory(name, settings)


def build_chat_provider(
    providers: Mapping[str, ProviderSettings],
    model: ModelSettings,
    *,
    outcomes: ProviderOutcomes | None = None,
) -> ChatProvider:
    """The provider a model runs on: each link of `[model, *model.fallbacks]` retried with its
    provider's retry settings, and the links chained by a `FallbackProvider` when there are
    fallbacks (each link then sends its own model name). With `outcomes`, every attempt of
    every link is recorded there."""
    refs = [(model.provider, model.name)]
    refs += [(fallback.provider, fallback.name) for fallback in model.fallbacks]
    links: list[tuple[ChatProvider, str]] = []
    for provider_name, model_name in refs:
        settings = providers.get(provider_name)
        if settings is None:
            raise ConfigError(f"provider {provider_name!r} is not defined under providers:")
        adapter = build_provider(provider_name, settings)
        if outcomes is not None:
            adapter = RecordedProvider(adapter, outcomes)
        retrying = RetryingProvider(
            adapter,
            max_retries=settings.max_retries,
            max_wait_s=settings.max_retry_wait_s,
        )
        links.append((retrying, model_name))
    if len(links) == 1:
        return links[0][0]
    return FallbackProvider(links)
