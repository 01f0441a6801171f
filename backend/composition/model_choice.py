"""Which model answers: the configured one, or the offline demo, and why.

The demo answers only when no provider has its key and only on loopback with `auth.mode:
none`; anywhere else a missing key is a configuration error that names the variable.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from backend.errors import ConfigError
from backend.providers.base import ChatProvider
from backend.providers.demo import DemoProvider
from backend.providers.registry import build_chat_provider
from backend.settings import ModelSettings, Settings

DEMO_MODEL = ModelSettings(provider="demo", name="tally-demo")
# The demo's window is small enough to roll within a dozen turns, so memory shows at once.
DEMO_WINDOW = 8
DEMO_BATCH = 4


@dataclass(frozen=True, slots=True)
class ModelChoice:
    model: ModelSettings
    is_demo: bool = False
    missing_key_env: str | None = None  # the demo answers because this variable is unset
    # In demo mode, what makes a real model answer: the variable to set, the file naming it.
    hint: str | None = None


def choose_model(settings: Settings) -> ModelChoice:
    """The configured model; or the demo, when no provider has its key (and only on loopback
    with `auth.mode: none`); otherwise ConfigError naming the variable that is not set."""
    if settings.model is None:
        return _demo(settings, "model", None)
    missing = _missing_keys(settings)
    if not missing:
        return ModelChoice(settings.model)
    key_path, env = missing[0]
    if key_path == "model.provider" and not _any_key_set(settings):
        return _demo(settings, key_path, env)
    name = _provider_at(settings, key_path)
    raise ConfigError(
        f"{key_path}: provider {name!r} needs {env} (providers.{name}.api_key_env),"
        " which is not set in the environment"
    )


def _demo(settings: Settings, key_path: str, env: str | None) -> ModelChoice:
    if settings.auth.mode == "none" and settings.server.is_loopback:
        hint = real_model_hint(settings, env)
        return ModelChoice(DEMO_MODEL, is_demo=True, missing_key_env=env, hint=hint)
    wanted = f"set {env}" if env else "configure a model and its provider"
    raise ConfigError(
        f"{key_path}: no LLM provider key is configured; {wanted}. The built-in demo provider"
        " answers only on a loopback address with auth.mode: none"
    )


def real_model_hint(settings: Settings, env: str | None) -> str:
    """What to do so a real model answers instead of the demo, naming the variable and the
    config file that names it (a sentence's end: "To talk to a real model, <hint>.")."""
    file = settings.source if Path(settings.source).is_file() else None
    if env and settings.model is not None:
        named_by = f"providers.{settings.model.provider}.api_key_env"
        return f"set {env} and restart" + (f" ({named_by} in {file} names it)" if file else "")
    if file:
        return f"name a model and its provider in {file} (model: and providers:) and restart"
    return "write a config with `tally init`, name a model and its provider in it, and restart"


def _missing_keys(settings: Settings) -> list[tuple[str, str]]:
    """(key path, variable) of each model's provider whose key variable is unset."""
    assert settings.model is not None
    refs = [("model.provider", settings.model.provider)]
    refs += [
        (f"model.fallbacks.{index}.provider", fallback.provider)
        for index, fallback in enumerate(settings.model.fallbacks)
    ]
    if settings.summarizer.provider is not None:
        refs.append(("summarizer.provider", settings.summarizer.provider))
    missing = []
    for key_path, name in refs:
        provider = settings.providers[name]
        if provider.api_key_env and not provider.api_key():
            missing.append((key_path, provider.api_key_env))
    return missing


def _provider_at(settings: Settings, key_path: str) -> str:
    assert settings.model is not None
    if key_path == "summarizer.provider":
        return settings.summarizer.provider or ""
    if key_path == "model.provider":
        return settings.model.provider
    return settings.model.fallbacks[int(key_path.split(".")[2])].provider


def _any_key_set(settings: Settings) -> bool:
    return any(p.api_key_env and p.api_key() for p in settings.providers.values())


def demo_settings(settings: Settings) -> Settings:
    """The demo's settings: a window that rolls within a dozen turns."""
    window = settings.persona.max_history_messages
    if window != -1 and window <= DEMO_WINDOW:
        return settings
    persona = settings.persona.model_copy(update={"max_history_messages": DEMO_WINDOW})
    memory = settings.memory.model_copy(update={"overflow_batch": DEMO_BATCH})
    return settings.model_copy(update={"persona": persona, "memory": memory})


def choose_provider(settings: Settings) -> tuple[ChatProvider, ModelChoice]:
    """The chosen model's provider chain (the demo provider in demo mode)."""
    choice = choose_model(settings)
    if choice.is_demo:
        return DemoProvider(hint=choice.hint or ""), choice
    return build_chat_provider(settings.providers, choice.model), choice
