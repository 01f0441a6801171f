"""A small, real MCP server (the `mcp` SDK's `MCPServer`) for testing Tally's MCP client.

Run it as `python -m tests.fakes.mcp_server stdio` or `python -m tests.fakes.mcp_server http
--port N` (streamable HTTP on 127.0.0.1, endpoint `/mcp`). `tests/fakes/mcp_harness.py` starts
it for tests. Unlike the other fakes it runs in its own process, because an MCP server over
stdio is one by nature, and killing the process is how a test plays a server that dies.

Tools: `echo`, `add`, `big`, `slow`, `fail`, `whoami`, `record`, and over HTTP `header`.
The environment steers it, so a test sets it per process:

- `FAKE_MCP_TOOLS`: comma-separated tool names; only these are registered (unset: all).
- `FAKE_MCP_SECRET`: what `whoami` returns, to prove the environment reached the server.
- `FAKE_MCP_LOG`: a file `record` appends its note to, to prove a call really ran (or not).
- `FAKE_MCP_AUTH` (HTTP): when set, a request whose `Authorization` header differs from it
  gets 401 before the SDK sees it, as a server behind a bearer token does.
"""

from __future__ import annotations

import argparse
import asyncio
import os
from collections.abc import Callable, Mapping
from typing import Any

from mcp import MCPError
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import INVALID_PARAMS
from starlette.types import ASGIApp, Receive, Scope, Send

HOST = "127.0.0.1"
ENDPOINT_PATH = "/mcp"  # the SDK's default `streamable_http_path`
END_MARKER = "END"
UNSET = "unset"


# ---- tools: their docstrings are the descriptions a client lists ------------------------------


def echo(text: str) -> str:
    """Return `text` unchanged."""
    return text


def add(a: int, b: int) -> int:
    """Return the sum of two integers."""
    return a + b


def big(size: int) -> str:
    """Return exactly `size` characters: repeated digits, ending with the marker END, so a
    client can tell a whole result from a truncated one."""
    if size <= 0:
        return ""
    filler = "0123456789" * (size // 10 + 1)
    return (filler[: max(size - len(END_MARKER), 0)] + END_MARKER)[-size:]


async def slow(seconds: float) -> str:
    """Sleep `seconds`, then return "slept"."""
    await asyncio.sleep(seconds)
    return "slept"


def fail(message: str) -> str:
    """Always fail with `message` (the client sees is_error with this text)."""
    # ToolError, not a plain exception: the SDK withholds a plain exception's text.
    raise ToolError(message)


def refuse(message: str) -> str:
    """Answer with a JSON-RPC error (invalid params) instead of a result, as some servers
    refuse bad arguments: the client raises, and the connection is fine."""
    raise MCPError(code=INVALID_PARAMS, message=message)


def whoami() -> str:
    """Return the server's FAKE_MCP_SECRET environment variable, or "unset"."""
    return os.environ.get("FAKE_MCP_SECRET", UNSET)


def record(note: str) -> str:
    """Append `note` as a line to the file named by FAKE_MCP_LOG, then return "recorded"."""
    path = os.environ.get("FAKE_MCP_LOG")
    if path:
        with open(path, "a", encoding="utf-8") as log:
            log.write(note + "\n")
    return "recorded"


ODD_RESULTS: Mapping[str, str] = {
    "nul": "before\x00after",
    "overlong": "y" * 300_000,
    "nested": "[" * 5_000 + "]" * 5_000,
}


def odd(kind: str) -> str:
    """Return text a careless server might: `nul` (a NUL character), `overlong` (300,000
    characters) or `nested` (brackets 5,000 deep)."""
    return ODD_RESULTS[kind]


def header(ctx: Context) -> str:
    """Return the Authorization header of the HTTP request carrying this call, or "unset"."""
    headers = ctx.headers or {}
    return headers.get("authorization", UNSET)


Tool = Callable[..., Any]
TOOLS: Mapping[str, Tool] = {
    "echo": echo,
    "add": add,
    "big": big,
    "slow": slow,
    "fail": fail,
    "refuse": refuse,
    "whoami": whoami,
    "record": record,
    "odd": odd,
}
HTTP_TOOLS: Mapping[str, Tool] = {**TOOLS, "header": header}  # stdio has no request headers


# ---- the server ----------------------------------------------------------------------------------


def chosen_tools(available: Mapping[str, Tool], selection: str | None) -> dict[str, Tool]:
    """The tools named in `selection` (FAKE_MCP_TOOLS), or all of them when it is unset.
    An unknown name stops the server: a typo must not quietly test a smaller server."""
    if selection is None:
        return dict(available)
    names = [name.strip() for name in selection.split(",") if name.strip()]
    unknown = sorted(set(names) - set(available))
    if unknown:
        raise SystemExit(f"FAKE_MCP_TOOLS names unknown tools: {', '.join(unknown)}")
    return {name: available[name] for name in names}


def build_server(available: Mapping[str, Tool]) -> MCPServer:
    server = MCPServer("tally-fake-mcp", log_level="WARNING")
    for name, function in chosen_tools(available, os.environ.get("FAKE_MCP_TOOLS")).items():
        server.add_tool(function, name=name)
    return server


class RequireAuthorization:
    """ASGI middleware: 401 for any HTTP request whose `Authorization` header is not
    `expected`. Lifespan events pass through, so the SDK's session manager still starts."""

    def __init__(self, app: ASGIApp, expected: str) -> None:
        self.app = app
        self.expected = expected.encode("latin-1")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            scope["type"] == "http"
            and dict(scope["headers"]).get(b"authorization") != self.expected
        ):
            await send({"type": "http.response.start", "status": 401, "headers": []})
            await send({"type": "http.response.body", "body": b"unauthorized"})
            return
        await self.app(scope, receive, send)


def serve_http(port: int) -> None:
    """Serve streamable HTTP on 127.0.0.1:`port`, as `MCPServer.run("streamable-http")` does,
    with the optional FAKE_MCP_AUTH check in front."""
    import uvicorn  # only the HTTP transport needs it

    app: ASGIApp = build_server(HTTP_TOOLS).streamable_http_app(
        streamable_http_path=ENDPOINT_PATH, host=HOST
    )
    expected = os.environ.get("FAKE_MCP_AUTH")
    if expected is not None:
        app = RequireAuthorization(app, expected)
    uvicorn.run(app, host=HOST, port=port, log_level="warning")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="A fake MCP server for Tally's tests.")
    parser.add_argument("transport", choices=["stdio", "http"])
    parser.add_argument("--port", type=int, default=8000, help="HTTP only")
    options = parser.parse_args(argv)
    if options.transport == "stdio":
        build_server(TOOLS).run("stdio")
    else:
        serve_http(options.port)


if __name__ == "__main__":
    main()
