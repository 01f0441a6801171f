"""QQ bots with several processes on one PostgreSQL database: one process holds the websocket
gateway (the leader) and another takes over when it stops; webhook calls are taken by every
process, and a signature used at one is refused at the other (the replay is remembered in the
database, not in a process)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from tests.channels.qq_fixtures import APP_ID, APP_SECRET, qq_settings
from tests.channels.test_bot_leadership import _count, leaders, processes
from tests.fakes.qq_server import FakeQQServer, webhook_headers
from tests.waiting import until


async def test_one_process_holds_the_gateway_and_another_takes_over(
    qq: FakeQQServer, postgres: str, tmp_path: Path
) -> None:
    async with processes(2, postgres, tmp_path, qq_settings(qq, mode="websocket")) as procs:
        await until(lambda: _count(leaders(procs), 1), "one leader")
        await asyncio.to_thread(qq.wait_connected, APP_ID)
        (leader,) = await leaders(procs)
        await leader.stop()
        await asyncio.to_thread(qq.wait_connected, APP_ID, 2)  # the other connects
        await asyncio.to_thread(qq.push, APP_ID, qq.private_message("still there?"))
        (reply,) = await asyncio.to_thread(qq.wait_for_sent, 1)
    assert qq.opened(APP_ID) == 2 and reply.text == "Hello from Tally."


async def test_a_signature_used_at_one_process_is_refused_at_another(
    qq: FakeQQServer, postgres: str, tmp_path: Path
) -> None:
    async with processes(2, postgres, tmp_path, qq_settings(qq)) as (first, second):
        body = json.dumps(qq.private_message("to both")).encode()
        headers = webhook_headers(APP_SECRET, body)
        taken = await first.client.post("/channels/default/dt", content=body, headers=headers)
        replayed = await second.client.post("/channels/default/dt", content=body, headers=headers)
        await asyncio.to_thread(qq.wait_for_sent, 1)
        for process in (first, second):
            await process.app.state.channels.get("default", "dt").settle()
    assert (taken.status_code, replayed.status_code) == (200, 401)
    assert len(qq.sent()) == 1
