"""The address `tally serve` binds: each connection accepted on it sends without Nagle's delay.

A socket made without naming TCP (`proto` 0) got no TCP_NODELAY from asyncio, and a response
written in two parts then waited for the client's delayed ACK: 40 ms a request for clients
that do not read eagerly (Python's httpx, 44 ms for a plain GET against 3 ms)."""

from __future__ import annotations

import asyncio
import socket

from backend.cli.serve import bind
from backend.settings import ServerSettings


async def test_connections_accepted_on_the_bound_address_have_nagle_off() -> None:
    listening = bind(ServerSettings(host="127.0.0.1", port=0))
    accepted: asyncio.Queue[int] = asyncio.Queue()

    async def on_connection(_reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        sock = writer.get_extra_info("socket")
        await accepted.put(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
        writer.close()

    listening.listen()
    server = await asyncio.start_server(on_connection, sock=listening)
    async with server:
        port = listening.getsockname()[1]
        _reader, writer = await asyncio.open_connection("127.0.0.1", port)
        nodelay = await accepted.get()
        writer.close()
        await writer.wait_closed()
    assert nodelay != 0
