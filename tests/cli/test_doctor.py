"""`tally doctor`: what it checks and what it tells the user to fix."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from tests.cli.runner import config, tally
from tests.conftest import ROOT
from tests.fakes.dingtalk_server import FakeDingTalkServer
from tests.fakes.discord_server import FakeDiscordServer
from tests.fakes.feishu_server import FakeFeishuServer
from tests.fakes.qq_server import FakeQQServer
from tests.fakes.slack_server import FakeSlackServer
from tests.fakes.telegram_server import FakeTelegramServer
from tests.fakes.wecom_robot_server import FakeRobotServer
from tests.fakes.wecom_server import App as WeComApp
from tests.fakes.wecom_server import FakeWeComServer

pytestmark = pytest.mark.process

OPENAI = "providers:\n  openai: {kind: openai_compatible, api_key_env: OPENAI_API_KEY}\n"
# Configs that parse but cannot serve, and the key path each error must name.
BROKEN = [
    ("tools: {enabled: [now, web_search]}\n", "tools.enabled.1: unknown tool 'web_search'"),
    ("persona: {system_template: nope.md.j2}\n", "persona.system_template: 'nope.md.j2'"),
    ("model: {provider: y, name: m}\n", "model.provider: provider 'y' is not defined"),
    (
        "providers: {openai: {kind: openai_compatible, api_key: sk-1}}\n",
        "providers.openai.api_key: unknown key; secrets never go in the file",
    ),
    (
        "tenants: {acme: {tools: {enabled: [shell]}}}\n",
        "tenants.acme.tools.enabled.0: unknown tool 'shell'",
    ),
    # Bots ($HOME stands in for a token variable that is set).
    (
        "channels: {tg: {kind: telegram, token_env: TALLY_UNSET_TOKEN}}\n",
        "channels.tg.token_env: TALLY_UNSET_TOKEN is not set",
    ),
    (
        "channels: {tg: {kind: telegram, token_env: HOME, mode: webhook}}\n",
        "webhook mode needs webhook_url and webhook_secret_env",
    ),
    (
        "channels: {a: {kind: telegram, token_env: HOME}}\n"
        "tenants: {acme: {channels: {b: {kind: telegram, token_env: HOME}}}}\n",
        "tenants.acme.channels.b: the same bot token as channels.a",
    ),
    ("channels: {tg: {kind: icq, token_env: HOME}}\n", "channels.tg"),
]


def test_the_shipped_config_passes_with_a_warning_for_demo_mode(tmp_path: Path) -> None:
    shutil.copy(ROOT / "config.yaml", tmp_path / "config.yaml")
    shutil.copytree(ROOT / "prompts", tmp_path / "prompts")

    result = tally("--config", str(tmp_path / "config.yaml"), "doctor")

    assert result.returncode == 0, result.stdout
    assert "ok    config" in result.stdout and "ok    prompts" in result.stdout
    assert "ok    database" in result.stdout
    assert "WARN  provider: demo mode" in result.stdout and "OPENAI_API_KEY" in result.stdout
    assert "FAIL" not in result.stdout


@pytest.mark.parametrize(("extra", "problem"), BROKEN)
def test_every_config_error_that_stops_serving_fails_the_check(
    tmp_path: Path, extra: str, problem: str
) -> None:
    path = config(tmp_path, extra)
    result = tally("--config", str(path), "doctor")
    assert result.returncode == 1
    assert f"FAIL  config: {path}: invalid configuration" in result.stdout
    assert problem in result.stdout


def test_a_missing_key_is_named_when_another_provider_has_one(tmp_path: Path) -> None:
    path = config(
        tmp_path,
        OPENAI + "  claude: {kind: anthropic, api_key_env: ANTHROPIC_API_KEY}\n"
        "model: {provider: openai, name: gpt-4o-mini}\n",
    )
    result = tally("--config", str(path), "doctor", env={"ANTHROPIC_API_KEY": "sk-ant-test"})
    assert result.returncode == 1
    assert "model.provider: provider 'openai' needs OPENAI_API_KEY" in result.stdout


def test_a_file_that_cannot_be_read_fails(tmp_path: Path) -> None:
    broken = tally("--config", str(tmp_path / "missing.yaml"), "doctor")
    assert broken.returncode == 1 and "FAIL  config" in broken.stdout


def test_an_unreachable_provider_is_named_with_its_url_and_the_cause(
    tmp_path: Path, refused_port: int
) -> None:
    url = f"http://127.0.0.1:{refused_port}/v1"
    path = config(
        tmp_path,
        f"providers:\n  myvendor: {{kind: openai_compatible, base_url: '{url}', max_retries: 0,"
        " api_key_env: MYVENDOR_KEY}\nmodel: {provider: myvendor, name: m}\n",
    )
    result = tally("--config", str(path), "doctor", env={"MYVENDOR_KEY": "k"})
    assert result.returncode == 1
    assert f"FAIL  provider: myvendor ({url}): connection refused" in result.stdout


def test_each_bot_is_asked_who_it_is_and_a_refused_token_fails(tmp_path: Path) -> None:
    with FakeTelegramServer() as telegram:
        telegram.add_bot("1:good", username="helper_bot")
        path = config(
            tmp_path,
            "channels:\n"
            f"  good: {{kind: telegram, token_env: GOOD_TG, api_base_url: '{telegram.base_url}'}}\n"
            "tenants:\n  acme:\n    channels:\n"
            f"      stale: {{kind: telegram, token_env: STALE_TG, "
            f"api_base_url: '{telegram.base_url}'}}\n",
        )
        env = {"GOOD_TG": "1:good", "STALE_TG": "2:revoked-by-botfather"}
        result = tally("--config", str(path), "doctor", env=env)
        offline = tally("--config", str(path), "doctor", "--offline", env=env)
    assert result.returncode == 1, result.stdout
    assert "ok    bot channels.good: @helper_bot (polling)" in result.stdout
    assert "FAIL  bot tenants.acme.channels.stale:" in result.stdout
    assert "refused the token" in result.stdout and "fix: check STALE_TG" in result.stdout
    assert (
        offline.returncode == 0 and "bot tenants.acme.channels.stale: not called" in offline.stdout
    )


def test_each_robot_is_asked_for_a_token_and_refused_or_unreachable_ones_fail(
    tmp_path: Path, refused_port: int
) -> None:
    down_url = f"http://127.0.0.1:{refused_port}"
    with FakeDingTalkServer() as dingtalk:
        dingtalk.add_app("good-app", "good-secret", "good-robot")
        dingtalk.add_app("wrong-app", "the-real-secret", "wrong-robot")

        def robot(name: str, url: str, extra: str = "") -> str:
            env = name.upper()
            return (
                f"{{kind: dingtalk, client_id_env: {env}_DT_ID, client_secret_env: {env}_DT_KEY,"
                f" openapi_base_url: '{url}'{extra}}}"
            )

        path = config(
            tmp_path,
            f"channels:\n  good: {robot('good', dingtalk.base_url, ', robot_code: good-robot')}\n"
            "tenants:\n  acme:\n    channels:\n"
            f"      wrong: {robot('wrong', dingtalk.base_url, ', mode: callback')}\n"
            f"      down: {robot('down', down_url)}\n",
        )
        env = {
            "GOOD_DT_ID": "good-app",
            "GOOD_DT_KEY": "good-secret",
            "WRONG_DT_ID": "wrong-app",
            "WRONG_DT_KEY": "rotated-in-the-console",  # DingTalk: 400 invalidClientSecret
            "DOWN_DT_ID": "down-app",
            "DOWN_DT_KEY": "down-secret",
        }
        result = tally("--config", str(path), "doctor", env=env)
        offline = tally("--config", str(path), "doctor", "--offline", env=env)
        asked = [r.body.get("appKey") for r in dingtalk.requests]
    assert result.returncode == 1, result.stdout
    out = result.stdout
    assert "ok    bot channels.good: robot good-robot (stream), credentials accepted" in out
    assert "FAIL  bot tenants.acme.channels.wrong:" in out and "invalidClientSecret" in out
    assert f"{dingtalk.base_url} refused the credentials" in out
    assert f"fix: check WRONG_DT_ID, WRONG_DT_KEY and openapi_base_url ({dingtalk.base_url})" in out
    down_host = down_url.removeprefix("http://")
    assert f"FAIL  bot tenants.acme.channels.down: cannot reach {down_host}:" in out
    assert f"fix: check DOWN_DT_ID, DOWN_DT_KEY and openapi_base_url ({down_url})" in out
    assert sorted(asked) == ["good-app", "wrong-app"]  # one token request each, no retries
    assert out.count("credentials accepted") == 1  # the good robot's line alone
    assert offline.returncode == 0, offline.stdout
    assert "ok    bot tenants.acme.channels.wrong: not called (--offline)" in offline.stdout


def test_each_mcp_server_is_started_and_listed_or_failed(tmp_path: Path, refused_port: int) -> None:
    closed = refused_port
    path = config(
        tmp_path,
        "tools:\n  mcp_servers:\n"
        f"    fake: {{command: '{sys.executable}', args: [-m, tests.fakes.mcp_server, stdio],"
        " env: [PYTHONPATH]}\n"
        "tenants:\n  acme:\n    tools:\n      mcp_servers:\n"
        f"        gone: {{url: 'http://127.0.0.1:{closed}/mcp', connect_timeout_s: 5}}\n",
    )
    env = {"PYTHONPATH": str(ROOT)}
    result = tally("--config", str(path), "doctor", env=env)
    offline = tally("--config", str(path), "doctor", "--offline", env=env)
    assert result.returncode == 1, result.stdout
    assert "ok    MCP server tools.mcp_servers.fake: 9 tools" in result.stdout
    assert "FAIL  MCP server tenants.acme.tools.mcp_servers.gone:" in result.stdout
    assert "fix: check its url and headers" in result.stdout
    assert "MCP server tenants.acme.tools.mcp_servers.gone: not started" in offline.stdout


def test_each_qq_bot_gets_a_token_and_names_itself_and_refused_or_unreachable_ones_fail(
    tmp_path: Path, refused_port: int
) -> None:
    down_url = f"http://127.0.0.1:{refused_port}"
    with FakeQQServer() as qq:
        qq.add_app("102000001", "good-secret")
        qq.add_app("102000002", "the-real-secret")

        def bot(app_id: str, env: str, url: str) -> str:
            return (
                f"{{kind: qq, app_id: '{app_id}', app_secret_env: {env},"
                f" api_base_url: '{url}', token_base_url: '{url}'}}"
            )

        path = config(
            tmp_path,
            f"channels:\n  good: {bot('102000001', 'GOOD_QQ', qq.base_url)}\n"
            "tenants:\n  acme:\n    channels:\n"
            f"      wrong: {bot('102000002', 'WRONG_QQ', qq.base_url)}\n"
            f"      down: {bot('102000003', 'DOWN_QQ', down_url)}\n",
        )
        env = {"GOOD_QQ": "good-secret", "WRONG_QQ": "rotated", "DOWN_QQ": "down-secret"}
        result = tally("--config", str(path), "doctor", env=env)
        asked = [(r.method, r.path) for r in qq.requests]
    out = result.stdout
    assert result.returncode == 1, out
    assert "ok    bot channels.good: Tally QQ (app 102000001, webhook), credentials accepted" in out
    assert "FAIL  bot tenants.acme.channels.wrong:" in out
    assert "QQ refused the credentials of app 102000002" in out
    assert "fix: check app_id (102000002), WRONG_QQ" in out
    assert (
        f"FAIL  bot tenants.acme.channels.down: cannot reach {down_url.removeprefix('http://')}"
        in out
    )
    assert sorted(asked) == sorted(
        [("POST", "/app/getAppAccessToken")] * 2 + [("GET", "/users/@me")]
    )  # no retries: doctor reports


def test_each_discord_bot_is_asked_who_it_is_and_refused_or_unreachable_ones_fail(
    tmp_path: Path, refused_port: int
) -> None:
    down_url = f"http://127.0.0.1:{refused_port}/api/v10"
    with FakeDiscordServer() as discord_fake:
        discord_fake.add_bot("good-token", user_id="800000000000000001", username="tally")

        def bot(name: str, url: str) -> str:
            return f"{{kind: discord, token_env: {name.upper()}_DC_TOKEN, api_base_url: '{url}'}}"

        path = config(
            tmp_path,
            f"channels:\n  good: {bot('good', discord_fake.api_base_url)}\n"
            "tenants:\n  acme:\n    channels:\n"
            f"      wrong: {bot('wrong', discord_fake.api_base_url)}\n"
            f"      down: {bot('down', down_url)}\n",
        )
        env = {
            "GOOD_DC_TOKEN": "good-token",
            "WRONG_DC_TOKEN": "reset-in-the-portal",
            "DOWN_DC_TOKEN": "down-token",
        }
        result = tally("--config", str(path), "doctor", env=env)
    assert result.returncode == 1, result.stdout
    out = result.stdout
    assert "ok    bot channels.good: @tally (id 800000000000000001), token accepted" in out
    assert "FAIL  bot tenants.acme.channels.wrong:" in out
    assert f"{discord_fake.api_base_url} refused the token" in out
    assert f"fix: check WRONG_DC_TOKEN and api_base_url ({discord_fake.api_base_url})" in out
    assert "FAIL  bot tenants.acme.channels.down: cannot reach" in out
    assert out.count("token accepted") == 1


def test_each_slack_bot_is_asked_who_it_is_and_a_refused_or_unreachable_one_fails(
    tmp_path: Path, refused_port: int
) -> None:
    down_url = f"http://127.0.0.1:{refused_port}/api/"
    with FakeSlackServer(bot_token="xoxb-good", app_token="xapp-good") as slack:

        def bot(name: str, url: str) -> str:
            env = name.upper()
            return (
                f"{{kind: slack, bot_token_env: {env}_SLACK_BOT, app_token_env: {env}_SLACK_APP,"
                f" api_base_url: '{url}'}}"
            )

        path = config(
            tmp_path,
            f"channels:\n  good: {bot('good', slack.api_url)}\n"
            "tenants:\n  acme:\n    channels:\n"
            f"      revoked: {bot('revoked', slack.api_url)}\n"
            f"      down: {bot('down', down_url)}\n",
        )
        env = {
            "GOOD_SLACK_BOT": "xoxb-good",
            "GOOD_SLACK_APP": "xapp-good",
            "REVOKED_SLACK_BOT": "xoxb-revoked",
            "REVOKED_SLACK_APP": "xapp-revoked",
            "DOWN_SLACK_BOT": "xoxb-down",
            "DOWN_SLACK_APP": "xapp-down",
        }
        result = tally("--config", str(path), "doctor", env=env)
        offline = tally("--config", str(path), "doctor", "--offline", env=env)
    out = result.stdout
    assert result.returncode == 1, out
    assert "ok    bot channels.good: @tally in Tally Test (socket)" in out
    assert "FAIL  bot tenants.acme.channels.revoked:" in out and "invalid_auth" in out
    assert "fix: check REVOKED_SLACK_BOT" in out
    assert "FAIL  bot tenants.acme.channels.down:" in out
    assert slack.calls("auth.test") == 2 and slack.calls("apps.connections.open") == 0
    assert offline.returncode == 0, offline.stdout


def test_each_wecom_app_is_asked_for_a_token_and_itself_and_refused_or_unreachable_ones_fail(
    tmp_path: Path, refused_port: int
) -> None:
    down_url = f"http://127.0.0.1:{refused_port}"
    key = "jWmYm7qr5nMoAUwZRjGtBxmz3KA1tkAj3ykkR6q2B2C"
    with FakeWeComServer() as wecom:
        wecom.add_app(WeComApp("ww-good", 1000002, "good-secret", "tok", key, name="Helper"))
        wecom.add_app(WeComApp("ww-agent", 1000003, "agent-secret", "tok", key))

        def app(name: str, url: str, corp: str, agent: int) -> str:
            env = name.upper()
            return (
                f"{{kind: wecom, corp_id: {corp}, agent_id: {agent}, secret_env: {env}_WC,"
                f" token_env: WC_TOKEN, aes_key_env: WC_KEY, api_base_url: '{url}'}}"
            )

        path = config(
            tmp_path,
            f"channels:\n  good: {app('good', wecom.base_url, 'ww-good', 1000002)}\n"
            "tenants:\n  acme:\n    channels:\n"
            f"      wrong: {app('wrong', wecom.base_url, 'ww-good', 1000009)}\n"
            f"      agent: {app('agent', wecom.base_url, 'ww-agent', 1000099)}\n"
            f"      down: {app('down', down_url, 'ww-down', 1000004)}\n",
        )
        env = {
            "GOOD_WC": "good-secret",
            "WRONG_WC": "rotated-in-the-console",  # WeCom: errcode 40001
            "AGENT_WC": "agent-secret",  # the secret of another agent: errcode 60011
            "DOWN_WC": "down-secret",
            "WC_TOKEN": "tok",
            "WC_KEY": key,
        }
        result = tally("--config", str(path), "doctor", env=env)
        asked = [r.path for r in wecom.requests]
    assert result.returncode == 1, result.stdout
    out = result.stdout
    assert "ok    bot channels.good: app Helper (agent 1000002), credentials accepted" in out
    assert "FAIL  bot tenants.acme.channels.wrong:" in out and "errcode 40001" in out
    assert "FAIL  bot tenants.acme.channels.agent:" in out and "errcode 60011" in out
    assert f"{wecom.base_url} refused the app" in out
    assert f"fix: check corp_id, agent_id, WRONG_WC and api_base_url ({wecom.base_url})" in out
    assert "FAIL  bot tenants.acme.channels.down: cannot reach 127.0.0.1:" in out
    assert sorted(asked).count("/cgi-bin/gettoken") == 3  # once each answering app, no retries
    assert sorted(asked).count("/cgi-bin/agent/get") == 2


def test_each_wecom_robot_subscribes_once_and_refused_or_unreachable_ones_fail(
    tmp_path: Path, refused_port: int
) -> None:
    with FakeRobotServer("aib-good", "robot-secret") as robot:

        def bot(name: str, url: str) -> str:
            return (
                f"{{kind: wecom, mode: robot, bot_id: aib-{name},"
                f" bot_secret_env: {name.upper()}_WR, ws_url: '{url}'}}"
            )

        path = config(
            tmp_path,
            f"channels:\n  good: {bot('good', robot.url)}\n"
            "tenants:\n  acme:\n    channels:\n"
            f"      wrong: {bot('wrong', robot.url)}\n"
            f"      down: {bot('down', f'ws://127.0.0.1:{refused_port}')}\n",
        )
        env = {"GOOD_WR": "robot-secret", "WRONG_WR": "rotated", "DOWN_WR": "x"}
        result = tally("--config", str(path), "doctor", env=env)
        subscribed = [s["secret"] for s in robot.subscribes]
    out = result.stdout
    assert result.returncode == 1, out
    assert "ok    bot channels.good: robot aib-good, subscribed" in out
    assert "FAIL  bot tenants.acme.channels.wrong:" in out and "40001" in out
    assert "FAIL  bot tenants.acme.channels.down: cannot reach ws://127.0.0.1:" in out
    assert "fix: check bot_id, WRONG_WR and ws_url" in out
    assert sorted(subscribed) == ["robot-secret", "rotated"]  # once each, no retries


def test_each_feishu_bot_is_asked_who_it_is_and_refused_or_unreachable_ones_fail(
    tmp_path: Path, refused_port: int
) -> None:
    down_url = f"http://127.0.0.1:{refused_port}"
    with FakeFeishuServer() as feishu:
        feishu.add_app("cli_good", "good-secret", bot_open_id="ou_good_bot", name="Good Bot")
        feishu.add_app("cli_wrong", "the-real-secret")

        def bot(name: str, url: str) -> str:
            return (
                f"{{kind: feishu, app_id: cli_{name}, app_secret_env: {name.upper()}_FS_SECRET,"
                f" base_url: '{url}'}}"
            )

        path = config(
            tmp_path,
            f"channels:\n  good: {bot('good', feishu.base_url)}\n"
            "tenants:\n  acme:\n    channels:\n"
            f"      wrong: {bot('wrong', feishu.base_url)}\n"
            f"      down: {bot('down', down_url)}\n",
        )
        env = {
            "GOOD_FS_SECRET": "good-secret",
            "WRONG_FS_SECRET": "rotated-in-the-console",
            "DOWN_FS_SECRET": "down-secret",
        }
        result = tally("--config", str(path), "doctor", env=env)
        asked = [r.path for r in feishu.requests]
    assert result.returncode == 1, result.stdout
    out = result.stdout
    assert "ok    bot channels.good: bot Good Bot (ou_good_bot, websocket)" in out
    assert "FAIL  bot tenants.acme.channels.wrong:" in out and "10014" in out
    assert f"{feishu.base_url} refused the app" in out
    assert f"fix: check app_id cli_wrong, WRONG_FS_SECRET and {feishu.base_url}" in out
    assert "FAIL  bot tenants.acme.channels.down: cannot reach" in out
    assert asked.count("/open-apis/bot/v3/info") == 1  # the good one's; no retries
