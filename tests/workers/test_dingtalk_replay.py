"""A DingTalk callback signature replayed to two worker processes at once (issue 30;
docs/operations.md, reliability I). DingTalk's `sign` covers the time, not the body: a signature
captured from one message and sent with another body at the same moment to a second process must not
pass both. Two real `tally serve` processes on one PostgreSQL and one Redis each get one of the two
messages with the same signature, at the same time, round after round: exactly one of each pair is
answered 200 and kept, the other refused 401; a redelivery of the message that won still passes."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import yaml

from tests.channels.conftest import CLIENT_ID, CLIENT_SECRET, ROBOT, signed
from tests.crash import TallyProcess
from tests.fakes.dingtalk_server import FakeDingTalkServer
from tests.fakes.openai_server import FakeOpenAIServer
from tests.workers.test_three_processes import fetch, shared_config

pytestmark = pytest.mark.process

ROUNDS = 12


@pytest.fixture
def dingtalk(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeDingTalkServer]:
    monkeypatch.setenv("REPLAY_DT_CLIENT_ID", CLIENT_ID)  # the server processes inherit them
    monkeypatch.setenv("REPLAY_DT_CLIENT_SECRET", CLIENT_SECRET)
    with FakeDingTalkServer() as server:
        server.add_app(CLIENT_ID, CLIENT_SECRET, ROBOT)
        yield server


async def test_a_signature_replayed_to_two_processes_at_once_passes_once(
    upstream: FakeOpenAIServer,
    dingtalk: FakeDingTalkServer,
    postgres: str,
    redis_url: str,
    redis_prefix: str,
    tmp_path: Path,
) -> None:
    files = shared_config(tmp_path, upstream, postgres, redis_url, redis_prefix)
    config = yaml.safe_load(files.config.read_text(encoding="utf-8"))
    config["channels"] = {
        "dt": {
            "kind": "dingtalk",
            "mode": "callback",
            "client_id_env": "REPLAY_DT_CLIENT_ID",
            "client_secret_env": "REPLAY_DT_CLIENT_SECRET",
            "robot_code": ROBOT,
            "allow_from": ["*"],
            "openapi_base_url": dingtalk.base_url,
        }
    }
    files.config.write_text(yaml.safe_dump(config), encoding="utf-8")
    answers: list[tuple[int, int]] = []
    winners: list[tuple[dict[str, str], dict[str, object], httpx.AsyncClient]] = []
    with TallyProcess(files) as first, TallyProcess(files) as second:
        async with (
            httpx.AsyncClient(base_url=first.base_url, timeout=60) as a,
            httpx.AsyncClient(base_url=second.base_url, timeout=60) as b,
        ):
            for n in range(ROUNDS):
                headers = signed(int(time.time() * 1000) + n)  # one signature, two bodies
                pair = [
                    dingtalk.robot_message(f"round {n}, message {side}", robot_code=ROBOT)
                    for side in ("a", "b")
                ]
                sent = await asyncio.gather(
                    *(
                        client.post("/channels/default/dt", json=message, headers=headers)
                        for client, message in zip((a, b), pair, strict=True)
                    )
                )
                answers.append((sent[0].status_code, sent[1].status_code))
                won = 0 if sent[0].status_code == 200 else 1
                winners.append((headers, pair[won], (a, b)[won]))
            again = [
                await client.post("/channels/default/dt", json=message, headers=headers)
                for headers, message, client in winners[:3]
            ]
            await asyncio.to_thread(dingtalk.wait_for_sent, ROUNDS)
        kept = await fetch(
            postgres,
            "SELECT platform_id FROM channel_updates WHERE status IN ('received', 'answered')",
        )

    assert sorted(answers) == sorted([pair for pair in answers if sorted(pair) == [200, 401]]), (
        answers
    )  # never both, never neither
    assert [r.status_code for r in again] == [200] * 3  # the message that won, delivered again
    assert sorted(row.platform_id for row in kept) == sorted(
        str(message["msgId"]) for _, message, _ in winners
    )
    assert len(dingtalk.sent()) == ROUNDS
