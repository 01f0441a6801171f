"""config.yaml is parsed strictly: a bad file stops start-up and names the key."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from backend.errors import ConfigError
from backend.settings import (
    ModelSettings,
    Settings,
    file_only_problems,
    layered_overrides,
    load_settings,
    tenant_settings,
)

ROOT = Path(__file__).resolve().parent.parent


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "config.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def test_shipped_config_is_valid() -> None:
    settings = load_settings(ROOT / "config.yaml")
    assert settings.model is not None and settings.model.provider == "openai"
    assert settings.database.url.endswith(str(ROOT / "data" / "tally.db"))


@pytest.mark.parametrize(
    ("text", "key", "reason"),
    [
        ("persona:\n  nmae: x\n", "persona.nmae", "unknown key (did you mean name?)"),
        ("server:\n  port: many\n", "server.port", "valid integer"),
        ("persona:\n  max_history_messages: 0\n", "persona.max_history_messages", "-1"),
        ("database:\n  url: mysql://x\n", "database.url", "sqlite+aiosqlite"),
        (
            "providers:\n  p: {kind: openai_compatible}\nmodel: {provider: q, name: m}\n",
            "model.provider",
            "'q' is not defined under providers: (defined: p)",
        ),
        ("providers:\n  p: {kind: grpc}\n", "providers.p.kind", "openai_compatible"),
        (
            "providers:\n  p: {kind: openai_compatible, api_key: sk-1}\n",
            "providers.p.api_key",
            "name it with api_key_env",
        ),
        (
            "providers:\n  p: {kind: scripted}\n"
            "model: {provider: p, name: m, fallbacks: [{provider: z, name: n}]}\n",
            "model.fallbacks.0.provider",
            "'z' is not defined",
        ),
        ("summarizer: {provider: z, name: n}\n", "summarizer.provider", "'z' is not defined"),
        ("tenants:\n  acme: {persona: {nmae: x}}\n", "tenants.acme.persona.nmae", "unknown key"),
        ("tools:\n  max_tool_iterations: 0\n", "tools.max_tool_iterations", "greater than"),
        (
            "tools:\n  mcp_servers:\n    fs: {command: x, url: 'http://a'}\n",
            "tools.mcp_servers.fs",
            "either command (stdio) or url",
        ),
        ("tools:\n  mcp_servers:\n    fs: {url: 'ftp://a'}\n", "tools.mcp_servers.fs", "http"),
        ("tools:\n  mcp_servers:\n    my_fs: {command: x}\n", "tools.mcp_servers", "'-'"),
        ("tools:\n  mcp_servers:\n    fs: {command: x, env: ['1X']}\n", "env.0", "variable"),
        ("tools:\n  approval: {required: ['rm -rf']}\n", "tools.approval.required", "glob"),
        ("tools:\n  mcp_allow: {fs: [read_*]}\n", "tools", "mcp_allow.fs: no such MCP server"),
        ("tools:\n  workspace: {max_file_bytes: 0}\n", "tools.workspace.max_file_bytes", "greater"),
    ],
)
def test_bad_value_names_file_key_and_reason(
    tmp_path: Path, text: str, key: str, reason: str
) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as caught:
        load_settings(path)
    message = caught.value.message
    assert str(path) in message
    assert key in message
    assert reason in message


def test_not_yaml_and_not_a_mapping_are_reported(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_settings(write(tmp_path, "a: [unclosed\n"))
    with pytest.raises(ConfigError, match="must be a mapping"):
        load_settings(write(tmp_path, "- a\n- b\n"))
    with pytest.raises(ConfigError, match="cannot read"):
        load_settings(tmp_path / "missing.yaml")


def test_python_tags_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_settings(write(tmp_path, "server: !!python/object/apply:os.system ['true']\n"))


def test_api_key_env_accepts_a_name_or_a_reference(tmp_path: Path) -> None:
    text = (
        "providers:\n"
        "  a: {kind: openai_compatible, api_key_env: OPENAI_API_KEY}\n"
        "  b: {kind: anthropic, api_key_env: '${ANTHROPIC_API_KEY}'}\n"
    )
    settings = load_settings(write(tmp_path, text))
    assert settings.providers["a"].api_key_env == "OPENAI_API_KEY"
    assert settings.providers["b"].api_key_env == "ANTHROPIC_API_KEY"


def test_tally_config_environment_variable_chooses_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write(tmp_path, "persona: {name: Ada}\n")
    monkeypatch.setenv("TALLY_CONFIG", str(path))
    assert load_settings().persona.name == "Ada"


@pytest.mark.process
def test_server_refuses_to_start_with_a_bad_config(tmp_path: Path) -> None:
    path = write(tmp_path, "server:\n  prot: 9000\n")
    result = subprocess.run(
        [sys.executable, "-m", "backend", "--config", str(path), "serve"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert result.returncode == 2
    assert "server.prot: unknown key" in result.stderr
    assert str(path) in result.stderr


THINKING_MODEL = "providers:\n  p: {kind: anthropic}\nmodel: {provider: p, name: m, %s}\n"


@pytest.mark.parametrize(
    ("model", "reason"),
    [
        ("thinking_budget_tokens: 512", "at least 1024 tokens"),
        ("thinking_budget_tokens: 4096", "must be below max_output_tokens (4096)"),
        (
            "max_output_tokens: 2048, thinking_budget_tokens: 3000",
            "must be below max_output_tokens (2048)",
        ),
    ],
)
def test_thinking_budget_outside_anthropics_limits_is_refused(
    tmp_path: Path, model: str, reason: str
) -> None:
    path = write(tmp_path, THINKING_MODEL % model)
    with pytest.raises(ConfigError) as caught:
        load_settings(path)
    assert "model.thinking_budget_tokens" in caught.value.message
    assert reason in caught.value.message


def test_thinking_settings_default_off_and_parse_when_set(tmp_path: Path) -> None:
    text = (
        "providers:\n"
        "  a: {kind: anthropic}\n"
        "  d: {kind: openai_compatible, reasoning_in_tool_loop: true}\n"
        "  o: {kind: openai_compatible}\n"
        "model: {provider: a, name: m, max_output_tokens: 8192, thinking_budget_tokens: 4096}\n"
    )
    settings = load_settings(write(tmp_path, text))
    assert settings.model is not None and settings.model.thinking_budget_tokens == 4096
    assert settings.providers["d"].reasoning_in_tool_loop
    assert not settings.providers["o"].reasoning_in_tool_loop
    assert ModelSettings(provider="a", name="m").thinking_budget_tokens is None


def test_reasoning_in_tool_loop_is_refused_outside_openai_compatible(tmp_path: Path) -> None:
    path = write(tmp_path, "providers:\n  a: {kind: anthropic, reasoning_in_tool_loop: true}\n")
    with pytest.raises(ConfigError) as caught:
        load_settings(path)
    assert "providers.a.reasoning_in_tool_loop: Value error, for kind openai_compatible only" in (
        caught.value.message
    )


def test_a_tenants_api_settings_layer_over_its_file_settings_key_by_key(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "tenants:\n  acme:\n    tools:\n      mcp_servers:\n        fs: {command: fs-server}\n",
    )
    settings = load_settings(path)
    layered = layered_overrides(settings, "acme", {"tools": {"enabled": ["now"]}})
    effective = tenant_settings(settings, "acme", layered)
    assert effective.tools.enabled == ["now"]
    assert effective.tools.mcp_servers["fs"].command == "fs-server"
    assert file_only_problems({"tools": {"mcp_servers": {}}}) == [
        "tools.mcp_servers: set in config.yaml by the operator only"
    ]


def test_a_tenant_cannot_set_the_processs_summarizer_jobs(tmp_path: Path) -> None:
    """memory.summarizer_jobs bounds the jobs of every tenant in a process: the operator's."""
    settings = load_settings(write(tmp_path, "memory: {summarizer_jobs: 8}\n"))
    with pytest.raises(ConfigError) as caught:
        tenant_settings(settings, "acme", {"memory": {"summarizer_jobs": 64}})
    assert settings.memory.summarizer_jobs == 8
    assert "memory.summarizer_jobs: set by the operator only" in caught.value.message


def problems_of(tmp_path: Path, text: str) -> ConfigError:
    with pytest.raises(ConfigError) as caught:
        load_settings(write(tmp_path, text))
    return caught.value


def test_every_problem_of_the_file_is_named_in_one_error(tmp_path: Path) -> None:
    error = problems_of(
        tmp_path,
        "server: {port: many}\n"
        "persona: {nmae: x, name: Ada}\n"
        "model: {provider: nowhere, name: m, fallbacks: [{provider: a}, {name: b}]}\n"
        "tenants: {acme: {persona: {language: fr}}, Bad: {}}\n",
    )

    assert error.problems == [  # the values first, in the settings' order, then the names
        "server.port: Input should be a valid integer, unable to parse string as an integer",
        "model.fallbacks.0.name: Field required",
        "model.fallbacks.1.provider: Field required",
        "persona.nmae: unknown key (did you mean name?)",
        "model.provider: provider 'nowhere' is not defined under providers: (defined: none)",
        "tenants.acme.persona.language: Input should be 'en' or 'zh'",
        "tenants.Bad: a tenant id is a lowercase slug",  # not acme's inherited model again
    ]
    assert error.message.splitlines()[1:] == [f"  {p}" for p in error.problems]


def test_the_settings_without_the_keys_in_error_are_kept_for_the_other_checks(
    tmp_path: Path,
) -> None:
    error = problems_of(tmp_path, "persona: {nmae: x, name: Ada}\nserver: {port: many}\n")

    assert isinstance(error.partial, Settings)
    assert error.partial.persona.name == "Ada"  # what was right still applies
    assert error.partial.server.port == 8000  # a bad value: the default, for now


def test_a_provider_in_error_is_not_also_called_undefined(tmp_path: Path) -> None:
    error = problems_of(
        tmp_path,
        "providers: {acme: {kind: martian, base_url: 'http://127.0.0.1:9/v1'}}\n"
        "model: {provider: acme, name: m}\n",
    )

    assert len(error.problems) == 1 and error.problems[0].startswith("providers.acme")


@pytest.mark.parametrize(
    "address", ["api.telegram.org", "https://api.telegram.org/bot123:abc", "ftp://example.org"]
)
def test_a_telegram_api_base_url_is_the_bot_apis_address(tmp_path: Path, address: str) -> None:
    error = problems_of(
        tmp_path,
        f"channels: {{tg: {{kind: telegram, token_env: HOME, api_base_url: '{address}'}}}}\n",
    )
    (problem,) = error.problems
    assert problem.startswith("channels.tg")
    assert "api_base_url is the Bot API's address without /bot<token>" in problem


@pytest.mark.parametrize("address", ["http://127.0.0.1:8081", "https://bot.example.com/api"])
def test_a_self_hosted_bot_api_server_is_accepted(tmp_path: Path, address: str) -> None:
    path = write(
        tmp_path,
        f"channels: {{tg: {{kind: telegram, token_env: HOME, api_base_url: '{address}'}}}}\n",
    )
    assert load_settings(path).channels["tg"].api_base_url == address
