"""Which model answers: the configured one, the demo, or a clear refusal naming the variable."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from backend.composition.model_choice import choose_model
from backend.errors import ConfigError
from backend.settings import Settings, load_settings
from tests.conftest import make_settings

PROVIDERS = {
    "openai": {"kind": "openai_compatible", "api_key_env": "OPENAI_API_KEY"},
    "anthropic": {"kind": "anthropic", "api_key_env": "ANTHROPIC_API_KEY"},
}


def settings_with(tmp_path: Path, **sections: Any) -> Settings:
    sections.setdefault("providers", PROVIDERS)
    sections.setdefault("model", {"provider": "openai", "name": "gpt-4o-mini"})
    return make_settings(f"sqlite+aiosqlite:///{tmp_path / 't.db'}", tmp_path, **sections)


def test_no_key_anywhere_on_loopback_without_auth_is_the_demo(tmp_path: Path) -> None:
    choice = choose_model(settings_with(tmp_path))
    assert choice.is_demo and choice.missing_key_env == "OPENAI_API_KEY"


def test_no_model_at_all_is_the_demo(tmp_path: Path) -> None:
    choice = choose_model(make_settings(f"sqlite+aiosqlite:///{tmp_path}/t.db", tmp_path))
    assert choice.is_demo and choice.missing_key_env is None


def test_the_key_set_means_the_configured_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    choice = choose_model(settings_with(tmp_path))
    assert not choice.is_demo and choice.model.name == "gpt-4o-mini"


def test_another_providers_key_set_names_the_missing_one_instead_of_the_demo(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    with pytest.raises(ConfigError) as caught:
        choose_model(settings_with(tmp_path))
    assert caught.value.message.startswith("model.provider:")
    assert "OPENAI_API_KEY" in caught.value.message
    assert "providers.openai.api_key_env" in caught.value.message


def test_a_fallback_without_its_key_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    model = {
        "provider": "openai",
        "name": "m",
        "fallbacks": [{"provider": "anthropic", "name": "c"}],
    }
    with pytest.raises(ConfigError, match=r"model\.fallbacks\.0\.provider: .*ANTHROPIC_API_KEY"):
        choose_model(settings_with(tmp_path, model=model))


@pytest.mark.parametrize(
    ("sections", "why"),
    [
        ({"auth": {"mode": "keys"}}, "auth.mode: none"),
        ({"server": {"host": "0.0.0.0"}}, "loopback"),
    ],
)
def test_the_demo_is_refused_with_keys_or_beyond_loopback(
    tmp_path: Path, sections: dict[str, Any], why: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        choose_model(settings_with(tmp_path, **sections))
    assert "set OPENAI_API_KEY" in caught.value.message and why in caught.value.message


def test_the_demo_names_the_variable_its_provider_and_the_config_file(tmp_path: Path) -> None:
    config = tmp_path / "deploy.yaml"
    config.write_text(
        "providers: {acme: {kind: openai_compatible, base_url: 'http://127.0.0.1:9/v1',"
        " api_key_env: ACME_KEY}}\nmodel: {provider: acme, name: m}\n",
        encoding="utf-8",
    )
    choice = choose_model(load_settings(config))

    assert choice.is_demo and choice.missing_key_env == "ACME_KEY"
    assert (
        choice.hint == f"set ACME_KEY and restart (providers.acme.api_key_env in {config} names it)"
    )


def test_with_no_model_the_demo_says_where_to_name_one(tmp_path: Path) -> None:
    config = tmp_path / "deploy.yaml"
    config.write_text("persona: {name: Ada}\n", encoding="utf-8")

    hint = choose_model(load_settings(config)).hint

    assert hint == f"name a model and its provider in {config} (model: and providers:) and restart"


def test_with_no_config_file_the_demo_points_to_tally_init(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("TALLY_CONFIG", raising=False)

    hint = choose_model(load_settings()).hint

    assert hint is not None and "`tally init`" in hint
