"""Slack's rate limit waited out, within bounds: the real slack_sdk against the fake Slack,
the waits recorded instead of slept."""

from __future__ import annotations

import pytest

from backend.channels.slack.api import MAX_RATE_LIMIT_WAITS, SlackApi, SlackError
from backend.settings.channels_slack import SlackSettings
from tests.fakes import RecordingSleep
from tests.fakes.slack_server import FakeSlackServer


def api(slack: FakeSlackServer, sleep: RecordingSleep) -> SlackApi:
    settings = SlackSettings.model_validate(
        {
            "kind": "slack",
            "bot_token_env": "SLACK_BOT_TOKEN",
            "app_token_env": "SLACK_APP_TOKEN",
            "api_base_url": slack.api_url,
        }
    )
    return SlackApi(settings, sleep=sleep)


async def test_retry_after_is_waited_as_slack_asks(slack: FakeSlackServer) -> None:
    sleep = RecordingSleep()
    slack.rate_limit_next("chat.postMessage", retry_after_s=7)
    slack.rate_limit_next("chat.postMessage", retry_after_s=2)
    await api(slack, sleep).post("C1", "hello", thread_ts="1.1")
    assert sleep.delays == [7, 2] and [s.text for s in slack.sent()] == ["hello"]


async def test_a_rate_limit_that_does_not_end_is_given_up_on(slack: FakeSlackServer) -> None:
    sleep = RecordingSleep()
    for _ in range(MAX_RATE_LIMIT_WAITS + 1):
        slack.rate_limit_next("chat.postMessage", retry_after_s=1)
    with pytest.raises(SlackError, match="rate limit"):
        await api(slack, sleep).post("C1", "hello")
    assert len(sleep.delays) == MAX_RATE_LIMIT_WAITS and slack.sent() == []


async def test_a_wait_longer_than_two_minutes_is_not_waited(slack: FakeSlackServer) -> None:
    sleep = RecordingSleep()
    slack.rate_limit_next("chat.postMessage", retry_after_s=3600)
    with pytest.raises(SlackError) as refused:
        await api(slack, sleep).post("C1", "hello")
    assert refused.value.status == 429 and sleep.delays == []


async def test_slacks_refusal_names_its_error(slack: FakeSlackServer) -> None:
    with pytest.raises(SlackError) as refused:
        await api(slack, RecordingSleep()).post("", "nowhere")
    assert refused.value.code == "channel_not_found"
