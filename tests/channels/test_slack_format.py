"""Markdown as Slack's mrkdwn, in chunks within the limit; Slack's known signature answer;
what a Slack event asks of the bot."""

from __future__ import annotations

from typing import Any

import pytest

from backend.channels.commands import Ask, Command
from backend.channels.platform_body import RefusedUpdate
from backend.channels.slack.format import MAX_CHARS, slack_chunks
from backend.channels.slack.inbound import SlackMessage, read_message, read_update
from backend.channels.slack.signature import EventSignatures
from backend.settings.channels_slack import SlackSettings


def test_markdown_becomes_mrkdwn() -> None:
    (chunk,) = slack_chunks(
        "# Title\n\n**bold**, *italic*, ~~gone~~ and [a link](https://example.com/a?b=1)\n\n"
        "- one\n- two\n\n> quoted\n\n`a < b` & c > d"
    )
    assert chunk == (
        "*Title*\n\n*bold*, _italic_, ~gone~ and <https://example.com/a?b=1|a link>\n\n"
        "• one\n• two\n\n&gt; quoted\n\n`a &lt; b` &amp; c &gt; d"
    )


def test_code_fences_are_kept_whole_and_never_split_inside() -> None:
    code = "\n".join(f"line_{n} = {n} * 2  # <tag>" for n in range(300))
    chunks = slack_chunks(f"Here:\n\n```python\n{code}\n```\n\nDone.")
    assert all(len(c) <= MAX_CHARS for c in chunks) and len(chunks) >= 3
    for chunk in chunks:
        assert chunk.count("```") % 2 == 0  # each piece of the block is fenced on its own
    assert "&lt;tag&gt;" in chunks[0] + chunks[1]
    assert chunks[-1].endswith("Done.")


def test_a_10000_character_reply_is_split_in_order_within_the_limit() -> None:
    reply = "\n\n".join(f"Part {n}: " + "word " * 190 for n in range(11))
    chunks = slack_chunks(reply)
    assert len(reply) > 10_000 and len(chunks) >= 3
    assert all(len(c) <= MAX_CHARS for c in chunks)
    assert " ".join(chunks).split() == reply.split()


def test_the_signature_matches_slacks_known_answer() -> None:
    """The example of Slack's "Verifying requests from Slack" page."""
    body = (
        b"token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&"
        b"channel_id=G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&"
        b"command=%2Fwebhook-collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2F"
        b"commands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&"
        b"trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c"
    )
    signature = "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503"
    at = EventSignatures("8f742231b10e8888abcd99yyyzzz85a5", clock=lambda: 1531420618)
    later = EventSignatures("8f742231b10e8888abcd99yyyzzz85a5", clock=lambda: 1531420618 + 301)
    assert at.problem(body, "1531420618", signature) is None
    assert at.problem(body + b"x", "1531420618", signature) is not None
    assert "five minutes" in (later.problem(body, "1531420618", signature) or "")


def settings(**overrides: Any) -> SlackSettings:
    fields = {"kind": "slack", "bot_token_env": "SLACK_BOT", "app_token_env": "SLACK_APP"}
    return SlackSettings.model_validate(fields | {"allow_from": ["*"]} | overrides)


def message(text: str, **event: Any) -> SlackMessage:
    payload = {
        "type": "event_callback",
        "event_id": "Ev1",
        "event": {"type": "message", "channel": "D1", "user": "U1", "text": text, "ts": "1.2"}
        | event,
        "authorizations": [{"user_id": "UBOT"}],
    }
    _, read = read_update(payload)
    assert isinstance(read, SlackMessage)
    return read


@pytest.mark.parametrize(
    ("text", "event", "asked"),
    [
        ("hello &lt;there&gt;", {}, Ask("hello <there>")),
        (" /forget 2", {}, Command("forget", "2")),
        ("<@UBOT> /new", {"type": "app_mention", "channel": "C1"}, Command("new")),
        ("<@UBOT|tally> hi", {"type": "app_mention", "channel": "C1"}, Ask("hi")),
        ("hi", {"channel": "C1", "channel_type": "channel"}, None),  # mention policy
        ("hi", {"subtype": "message_changed"}, None),
        ("hi", {"bot_id": "B1"}, None),
        ("hi", {"user": "UBOT"}, None),
        ("", {}, None),
    ],
)
def test_what_a_message_asks(text: str, event: dict[str, Any], asked: object) -> None:
    assert read_message(message(text, **event), settings(), bot_user="") == asked


def test_an_event_of_no_known_type_is_refused() -> None:
    with pytest.raises(RefusedUpdate, match="not a Slack event"):
        read_update({"type": "app_rate_limited"})
