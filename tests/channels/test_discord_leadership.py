"""A Discord bot with several processes on one PostgreSQL database: one process holds its
gateway connection (the leader); when it stops, another connects and answers. (The shared
`processes` helper names the bot `dt` for any kind but Telegram.)"""

from __future__ import annotations

import asyncio
from pathlib import Path

from tests.channels.discord_fixtures import DISCORD_TOKEN, discord_settings
from tests.channels.test_bot_leadership import _count, leaders, processes
from tests.fakes.discord_server import FakeDiscordServer
from tests.waiting import until


async def test_one_process_holds_a_discord_gateway_connection_and_another_takes_over(
    discord_fake: FakeDiscordServer, postgres: str, tmp_path: Path
) -> None:
    async with processes(2, postgres, tmp_path, discord_settings(discord_fake)) as procs:
        await until(lambda: _count(leaders(procs), 1), "one leader")
        await asyncio.to_thread(discord_fake.wait_connected, DISCORD_TOKEN)
        (leader,) = await leaders(procs)
        await leader.stop()
        await asyncio.to_thread(discord_fake.wait_connected, DISCORD_TOKEN, 2)  # the other
        message = discord_fake.message("anyone there?")
        await asyncio.to_thread(discord_fake.dispatch, DISCORD_TOKEN, "MESSAGE_CREATE", message)
        (reply,) = await asyncio.to_thread(discord_fake.wait_for_sent, 1)
        assert discord_fake.open_sockets(DISCORD_TOKEN) == 1  # never two connections
    assert reply.content == "Hello from Tally."
