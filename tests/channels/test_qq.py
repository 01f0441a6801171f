"""A QQ bot end to end: signed webhook calls at `POST /channels/{tenant}/{bot}` and the
websocket gateway against a fake QQ; turns stored exactly as a web turn's; every message
answered once, as passive replies with increasing msg_seq."""

from __future__ import annotations

import json
import time
from pathlib import Path

from tests.channels.qq_fixtures import APP_SECRET, qq_settings, serving_qq
from tests.fakes.qq_server import FakeQQServer, sign, webhook_headers


def test_the_fakes_signer_gives_the_known_answer() -> None:
    """The vector verified against the SDK and PyNaCl (NOTES-channels.md section 5)."""
    signature = sign(APP_SECRET, b"1725442341" + b"Arq0D5A61EgUu4OxUvOp")
    assert signature.startswith("3be3ed93") and signature.endswith("b039350a")


async def test_webhook_a_message_in_a_reply_out_stored_as_a_web_turn(
    qq: FakeQQServer, tmp_path: Path, database_url: str
) -> None:
    async with serving_qq(qq, tmp_path, database_url) as served:
        event = qq.private_message("Hi there!")
        answer = await served.deliver(event)
        kept_when_answered = await served.updates()
        (reply,) = await served.sent(1)
        stored = await served.stored()
    assert answer.status_code == 200 and answer.json() == {"op": 12, "d": 0}
    assert kept_when_answered == [(event["d"]["id"], kept_when_answered[0][1])]
    assert (reply.group, reply.target, reply.msg_id) == (False, "user-1", event["d"]["id"])
    assert (reply.msg_seq, reply.msg_type, reply.text) == (1, 0, "Hello from Tally.")
    assert stored == [("user", "Hi there!"), ("assistant", "Hello from Tally.")]


async def test_a_group_at_message_is_answered_in_the_group_in_markdown_when_allowed(
    qq: FakeQQServer, tmp_path: Path, database_url: str
) -> None:
    bot = qq_settings(qq, markdown=True)
    async with serving_qq(qq, tmp_path, database_url, bot=bot) as served:
        event = qq.group_message("what's up?", group="group-9", member="member-7")
        await served.deliver(event)
        (reply,) = await served.sent(1)
        stored = await served.stored("group-9")
    assert (reply.group, reply.target, reply.msg_type) == (True, "group-9", 2)
    assert stored == [("user", "what's up?"), ("assistant", "Hello from Tally.")]


async def test_the_callback_url_validation_is_answered_with_the_secrets_signature(
    qq: FakeQQServer, tmp_path: Path, database_url: str
) -> None:
    now = str(int(time.time()))
    async with serving_qq(qq, tmp_path, database_url) as served:
        challenge = {"op": 13, "d": {"plain_token": "Arq0D5A61EgUu4OxUvOp", "event_ts": now}}
        answer = await served.client.post("/channels/default/qb", json=challenge)
        stale = {"op": 13, "d": {"plain_token": "tok", "event_ts": "1725442341"}}
        refused = await served.client.post("/channels/default/qb", json=stale)
        updates = await served.updates()
    expected = sign(APP_SECRET, (now + "Arq0D5A61EgUu4OxUvOp").encode())
    assert answer.status_code == 200
    assert answer.json() == {"plain_token": "Arq0D5A61EgUu4OxUvOp", "signature": expected}
    assert refused.status_code == 200 and "refused" in refused.json() and updates == []


async def test_webhook_calls_are_checked_signed_fresh_and_once(
    qq: FakeQQServer, tmp_path: Path, database_url: str
) -> None:
    async with serving_qq(qq, tmp_path, database_url) as served:
        event = qq.private_message("Hello by webhook")
        body = json.dumps(event).encode()
        forged = await served.deliver(event, webhook_headers("not-our-secret", body))
        unsigned = await served.deliver(event, {})
        stale = await served.deliver(event, timestamp=int(time.time()) - 600)
        tampered = await served.deliver(
            event, webhook_headers(APP_SECRET, body), body=body.replace(b"Hello", b"Yello")
        )
        nothing_kept = await served.updates()

        headers = webhook_headers(APP_SECRET, body)
        good = await served.deliver(event, headers, body=body)
        (reply,) = await served.sent(1)
        replay = await served.deliver(event, headers, body=body)  # the same call again
        again = await served.deliver(event, timestamp=int(time.time()) + 1)  # QQ redelivers
        await served.settle()
        stored = await served.stored()
    assert [r.status_code for r in (forged, unsigned, stale, tampered)] == [401] * 4
    assert "300 s" in stale.json()["error"]["message"]
    assert nothing_kept == []
    assert good.status_code == 200 and reply.text == "Hello from Tally."
    assert replay.status_code == 401 and again.status_code == 200
    assert stored == [("user", "Hello by webhook"), ("assistant", "Hello from Tally.")]
    assert len(qq.sent()) == 1


async def test_an_event_that_is_no_message_is_kept_and_ignored_and_a_bad_body_refused(
    qq: FakeQQServer, tmp_path: Path, database_url: str
) -> None:
    """Both acknowledged ({"op":12}), so QQ does not deliver them again and again (tests/
    channels/test_bad_updates.py probes every kind of bad body)."""
    async with serving_qq(qq, tmp_path, database_url) as served:
        added = {"op": 0, "id": "GROUP_ADD_ROBOT:1", "t": "GROUP_ADD_ROBOT", "d": {"x": 1}}
        answer = await served.deliver(added)
        not_json = await served.deliver({}, body=b"{nope")
        await served.settle()
        updates = await served.updates()
    assert answer.json() == {"op": 12, "d": 0}
    assert not_json.status_code == 200 and not_json.json()["op"] == 12
    assert "not JSON" in not_json.json()["refused"]
    assert updates[0] == ("GROUP_ADD_ROBOT:1", "ignored") and updates[1][1] == "refused"
    assert qq.sent() == []


async def test_a_signed_validation_answer_offered_as_an_event_is_refused_and_not_recorded(
    qq: FakeQQServer, tmp_path: Path, database_url: str
) -> None:
    now = str(int(time.time()))
    async with serving_qq(qq, tmp_path, database_url) as served:
        challenge = {"op": 13, "d": {"plain_token": "Arq0D5A61EgUu4OxUvOp", "event_ts": now}}
        signature = (await served.client.post("/channels/default/qb", json=challenge)).json()
        headers = {"X-Signature-Ed25519": signature["signature"], "X-Signature-Timestamp": now}
        offered = await served.deliver({}, headers, body=b"Arq0D5A61EgUu4OxUvOp")
        forged = await served.deliver({}, {**headers, "X-Signature-Ed25519": "00"}, body=b"abc")
        updates = await served.updates()
    assert offered.status_code == 200 and "refused" in offered.json()
    assert forged.status_code == 401 and updates == []
