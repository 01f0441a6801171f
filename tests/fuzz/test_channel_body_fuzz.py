"""Fuzzing the chat platforms' webhook bodies (issue 30; docs/operations.md, reliability C, I): past
a valid proof (Telegram's secret token, DingTalk's signature), Hypothesis sends the bot bodies built
from its platform's real update (fields replaced by any JSON value: strings with NUL and lone
surrogates, integers of any size, NaN and infinities, nesting of any depth), arbitrary JSON, and
arbitrary bytes, to the real app (uvicorn on 127.0.0.1, a fresh SQLite file). Every body is answered
200 (kept, or refused and recorded), never an error, and the bot still answers a good update at the
end. The examples are derandomized: every run sends the same bodies."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import hypothesis
import pytest
from hypothesis import strategies as st

from backend.app import create_app
from backend.providers.scripted import ScriptedProvider
from tests.channels import slack_fixtures
from tests.channels.conftest import ROBOT, SECRET, bot_settings, robot_settings, signed
from tests.channels.feishu_fixtures import APP_ID as FEISHU_APP
from tests.channels.feishu_fixtures import APP_SECRET as FEISHU_SECRET
from tests.channels.feishu_fixtures import ENCRYPT_KEY, VERIFICATION_TOKEN, feishu_settings
from tests.channels.qq_fixtures import APP_ID as QQ_APP_ID
from tests.channels.qq_fixtures import APP_SECRET as QQ_APP_SECRET
from tests.channels.qq_fixtures import qq_settings
from tests.conftest import make_settings
from tests.fakes.dingtalk_server import FakeDingTalkServer
from tests.fakes.feishu_server import FakeFeishuServer, encrypted_body, signed_headers
from tests.fakes.qq_server import FakeQQServer, webhook_headers
from tests.fakes.slack_server import FakeSlackServer
from tests.fakes.telegram_server import FakeTelegramServer
from tests.fuzz.test_schema_fuzz import served_in_thread
from tests.waiting import until_blocking

FUZZ_SETTINGS = hypothesis.settings(
    max_examples=400,
    deadline=None,
    database=None,
    derandomize=True,
    suppress_health_check=list(hypothesis.HealthCheck),
    phases=[hypothesis.Phase.generate, hypothesis.Phase.shrink],
)
ANY_CHARACTER = st.characters(codec=None, categories=None)  # surrogates and NUL included
ANY_TEXT = st.text(ANY_CHARACTER, max_size=40)
SCALARS = (
    st.none()
    | st.booleans()
    | st.integers()  # of any size: 2**64 and beyond too
    | st.floats(allow_nan=True, allow_infinity=True)
    | ANY_TEXT
)
ANY_JSON = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(ANY_TEXT, inner, max_size=4),
    max_leaves=30,
)


def deep(depth: int) -> object:
    value: object = "bottom"
    for _ in range(depth):
        value = {"a": value}
    return value


ODD_VALUES = ANY_JSON | st.integers(30, 600).map(deep)  # deeper: the bad-update family


def paths_of(value: object, prefix: tuple[str | int, ...] = ()) -> list[tuple[str | int, ...]]:
    """Every field and item of a JSON value, by the keys and indexes that reach it."""
    found: list[tuple[str | int, ...]] = [prefix] if prefix else []
    if isinstance(value, dict):
        for key, item in value.items():
            found += paths_of(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += paths_of(item, (*prefix, index))
    return found


def replaced(update: dict[str, Any], path: tuple[str | int, ...], value: object) -> dict[str, Any]:
    copy: dict[str, Any] = json.loads(json.dumps(update))
    target: Any = copy
    for step in path[:-1]:
        target = target[step]
    target[path[-1]] = value
    return copy


def bodies(update: dict[str, Any]) -> st.SearchStrategy[bytes]:
    """Bodies a platform could send: its update with a field replaced, any JSON, any bytes."""
    paths = paths_of(update)
    mutated = st.builds(replaced, st.just(update), st.sampled_from(paths), ODD_VALUES).map(
        lambda value: json.dumps(value).encode()
    )
    anything = ANY_JSON.map(lambda value: json.dumps(value).encode())
    return st.one_of(mutated, mutated, anything, st.binary(max_size=200))


@dataclass
class Platform:
    name: str
    path: str
    headers: Callable[[int], dict[str, str]]
    update: Callable[[int], dict[str, Any]]
    replies: Callable[[], int]
    sign: Callable[[int, bytes], dict[str, str]] | None = None  # a proof over the body too
    encrypt: Callable[[bytes], bytes] | None = None  # a body the platform encrypts (Feishu)

    def headers_for(self, n: int, body: bytes) -> dict[str, str]:
        return self.sign(n, body) if self.sign is not None else self.headers(n)

    def body_for(self, body: bytes) -> bytes:
        return self.encrypt(body) if self.encrypt is not None else body


@pytest.fixture(params=["telegram", "dingtalk", "qq", "slack", "feishu"])
def platform(
    request: pytest.FixtureRequest, sqlite_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[Platform, Any]]:
    monkeypatch.setenv("TG_TOKEN", "123456:test-token")
    monkeypatch.setenv("TG_SECRET", SECRET)
    monkeypatch.setenv("DT_CLIENT_ID", "ding-client-1")
    monkeypatch.setenv("DT_CLIENT_SECRET", "ding-secret-1")
    if request.param == "telegram":
        with FakeTelegramServer() as telegram:
            telegram.add_bot("123456:test-token", username="tally_test_bot")
            bot = bot_settings(telegram, mode="webhook")
            yield (
                Platform(
                    "telegram",
                    "/channels/default/tg",
                    lambda n: {"X-Telegram-Bot-Api-Secret-Token": SECRET},
                    lambda n: telegram.user_message("hello") | {"update_id": 70_000 + n},
                    lambda: len(telegram.sent(42, "sendMessage")),
                ),
                {"tg": bot},
            )
        return
    if request.param == "qq":
        yield from qq_platform(monkeypatch)
        return
    if request.param == "feishu":
        yield from feishu_platform(monkeypatch)
        return
    if request.param == "slack":
        yield from slack_platform(monkeypatch)
        return
    with FakeDingTalkServer() as dingtalk:
        dingtalk.add_app("ding-client-1", "ding-secret-1", ROBOT)
        robot = robot_settings(dingtalk, mode="callback")
        yield (
            Platform(
                "dingtalk",
                "/channels/default/dt",
                lambda n: signed(int(time.time() * 1000) + n),
                lambda n: dingtalk.robot_message("hello", robot_code=ROBOT) | {"msgId": f"f{n}"},
                lambda: len(dingtalk.sent()),
            ),
            {"dt": robot},
        )


def qq_platform(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Platform, Any]]:
    monkeypatch.setenv("QQ_APP_SECRET", QQ_APP_SECRET)
    with FakeQQServer() as qq:
        qq.add_app(QQ_APP_ID, QQ_APP_SECRET)
        yield (
            Platform(
                "qq",
                "/channels/default/qb",
                lambda n: {},
                lambda n: qq.private_message("hello"),
                lambda: len(qq.sent()),
                # A fresh timestamp for each: the same body again is a redelivery, not a replay.
                sign=lambda n, body: webhook_headers(
                    QQ_APP_SECRET, body, int(time.time()) + n % 200
                ),
            ),
            {"qb": qq_settings(qq)},
        )


def slack_platform(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Platform, Any]]:
    monkeypatch.setenv("SLACK_BOT_TOKEN", slack_fixtures.BOT_TOKEN)
    monkeypatch.setenv("SLACK_SIGNING_SECRET", slack_fixtures.SIGNING_SECRET)
    with FakeSlackServer(bot_token=slack_fixtures.BOT_TOKEN, app_token="xapp-unused") as slack:
        bot = slack_fixtures.slack_settings(slack, mode="events")
        yield (
            Platform(
                "slack",
                "/channels/default/sl",
                lambda n: {},
                lambda n: slack.event("hello") | {"event_id": f"EvFuzz{n}"},
                lambda: len(slack.sent()),
                sign=lambda n, body: (
                    {"Content-Type": "application/json"} | slack_fixtures.signed(body)
                ),
            ),
            {"sl": bot},
        )


def feishu_platform(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Platform, Any]]:
    monkeypatch.setenv("FS_APP_SECRET", FEISHU_SECRET)
    monkeypatch.setenv("FS_ENCRYPT_KEY", ENCRYPT_KEY)
    monkeypatch.setenv("FS_VERIFY", VERIFICATION_TOKEN)
    with FakeFeishuServer() as feishu:
        feishu.add_app(FEISHU_APP, FEISHU_SECRET)
        yield (
            Platform(
                "feishu",
                "/channels/default/fs",
                lambda n: {},
                lambda n: feishu.message_event(
                    "hello", app_id=FEISHU_APP, token=VERIFICATION_TOKEN
                ),
                lambda: len(feishu.sent()),
                # Encrypted with the app's key, then signed (a fresh nonce each), as Feishu does.
                sign=lambda n, body: signed_headers(body, ENCRYPT_KEY),
                encrypt=lambda body: encrypted_body(body, ENCRYPT_KEY),
            ),
            {"fs": feishu_settings(feishu, mode="webhook")},
        )


@pytest.mark.slow
def test_no_body_past_a_valid_proof_is_answered_with_an_error(
    platform: tuple[Platform, Any],
    sqlite_url: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    entry, channels = platform
    settings = make_settings(sqlite_url, tmp_path, channels=channels)
    app = create_app(settings, provider=ScriptedProvider(replies=["ok"]))
    answered: list[int] = []
    with served_in_thread(app) as (portal, client):
        counter = iter(range(1, 1_000_000))

        @FUZZ_SETTINGS
        @hypothesis.given(bodies(entry.update(0)))
        def probe(body: bytes) -> None:
            n = next(counter)
            sent = entry.body_for(body)
            response = portal.call(
                lambda: client.post(entry.path, content=sent, headers=entry.headers_for(n, sent))
            )
            answered.append(response.status_code)
            assert response.status_code == 200, (body[:300], response.text[:300])

        probe()
        before = entry.replies()
        good = entry.body_for(json.dumps(entry.update(999_999)).encode())
        last = portal.call(
            lambda: client.post(entry.path, content=good, headers=entry.headers_for(0, good))
        )
        still_answers = until_blocking(
            lambda: entry.replies() > before, f"the {entry.name} bot answering a good update"
        )
    with capsys.disabled():
        print(
            f"\nchannel body fuzz, {entry.name}: {len(answered)} bodies sent, "
            f"{sum(code == 200 for code in answered)} answered 200, "
            f"{sum(code >= 500 for code in answered)} 5xx"
        )
    assert last.status_code == 200 and still_answers
