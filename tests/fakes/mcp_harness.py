"""Starting `tests/fakes/mcp_server.py` for a test: over HTTP as a subprocess the test can kill
and restart, or over stdio as the command a client spawns itself.

The server needs the repository root on its import path (`tests` is a package of the repo, not
an installed one). The HTTP harness runs it with cwd = the repo root. A stdio client spawns it
itself, and `mcp`'s `stdio_client` passes the child only a few variables (PATH, HOME, ...) plus
`StdioServerParameters.env`; so give it `env=stdio_env()` (or `cwd=REPO_ROOT`):

    command, args = stdio_command()
    params = StdioServerParameters(command=command, args=args, env={**stdio_env(), ...})

Readiness is a condition, never a fixed sleep: uvicorn listens only after the app's lifespan
(the SDK's session manager) has started, so a port that accepts a connection is a server that
answers MCP.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import IO

from tests.fakes.mcp_server import ENDPOINT_PATH, HOST
from tests.waiting import until

REPO_ROOT = Path(__file__).resolve().parents[2]
SERVER_MODULE = "tests.fakes.mcp_server"
START_DEADLINE_S = 60.0  # generous: two busy cores, and the SDK import alone takes ~1 s
POLL_INTERVAL_S = 0.05


def stdio_command() -> tuple[str, list[str]]:
    """The command and arguments that run the server over stdio (see `stdio_env`)."""
    return sys.executable, ["-m", SERVER_MODULE, "stdio"]


def stdio_env() -> dict[str, str]:
    """What a spawned stdio server needs in its environment to import `tests.fakes`: the repo
    root on PYTHONPATH, since the client chooses its cwd and strips the parent's environment."""
    return {"PYTHONPATH": str(REPO_ROOT)}


def free_port() -> int:
    """A port free on 127.0.0.1 right now (the kernel's pick for port 0)."""
    with socket.socket() as probe:
        probe.bind((HOST, 0))
        port: int = probe.getsockname()[1]
    return port


class McpHttpServer:
    """One fake MCP server process on a fixed port. The port outlives the process, so a
    client configured with `url` reaches the server again after `restart()`."""

    def __init__(self, port: int, env: Mapping[str, str] | None = None) -> None:
        self.port = port
        self.url = f"http://{HOST}:{port}{ENDPOINT_PATH}"
        self._env = {**os.environ, **stdio_env(), **(env or {})}
        self._stderr: IO[bytes] = tempfile.TemporaryFile()  # a file: a full pipe would block it
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def is_running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    async def start(self) -> None:
        """Start the process and return once its port accepts a connection."""
        if self.is_running:
            raise RuntimeError("the fake MCP server is already running")
        self.process = self._spawn()
        await self._wait_until_listening()

    def _spawn(self) -> subprocess.Popen[bytes]:
        """A plain `Popen`, not an asyncio subprocess: `kill()` must work synchronously, from
        any event loop or none (a test's cleanup), and the fork itself does not block."""
        self._stderr.seek(0)
        self._stderr.truncate()
        return subprocess.Popen(
            [sys.executable, "-m", SERVER_MODULE, "http", "--port", str(self.port)],
            cwd=REPO_ROOT,
            env=self._env,
            stdin=subprocess.DEVNULL,
            stdout=self._stderr,
            stderr=self._stderr,
        )

    def kill(self) -> None:
        """SIGKILL the server, as a crash does: no shutdown, open sessions just break."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
        if self.process is not None:
            self.process.wait()

    async def restart(self) -> None:
        """Kill the server if it runs, then start a fresh one on the same port. Sessions do
        not survive: a client must open a new one."""
        self.kill()
        await self.start()

    def close(self) -> None:
        self.kill()
        self._stderr.close()

    def stderr(self) -> str:
        """What the process wrote so far (uvicorn and the SDK log to stderr)."""
        self._stderr.flush()
        self._stderr.seek(0)
        return self._stderr.read().decode("utf-8", "replace")

    async def _wait_until_listening(self) -> None:
        try:
            await until(
                self._listening,
                lambda: f"the fake MCP server listening:\n{self.stderr()}",
                timeout_s=START_DEADLINE_S,
                poll_s=POLL_INTERVAL_S,
            )
        except AssertionError:
            self.kill()
            raise

    async def _listening(self) -> bool:
        """Whether the port accepts a connection; an error once the process has exited."""
        if await self._accepts_connection():
            return True
        assert self.process is not None
        if self.process.poll() is not None:
            raise RuntimeError(
                f"fake MCP server exited with {self.process.returncode}:\n{self.stderr()}"
            )
        return False

    async def _accepts_connection(self) -> bool:
        try:
            _, writer = await asyncio.wait_for(asyncio.open_connection(HOST, self.port), 5)
        except (OSError, TimeoutError):
            return False
        writer.close()
        await writer.wait_closed()
        return True


@asynccontextmanager
async def mcp_http_server(
    env: dict[str, str] | None = None, port: int | None = None
) -> AsyncIterator[McpHttpServer]:
    """A fake MCP server over streamable HTTP for the duration of the block, killed after.
    `env` is added to this process's environment (FAKE_MCP_TOOLS, FAKE_MCP_AUTH, ...)."""
    server = McpHttpServer(port if port is not None else free_port(), env)
    try:
        await server.start()
        yield server
    finally:
        server.close()
