"""Checks of the request head, before any route (the page, `/api`, `/v1`) sees the request.

- **Header bounds**: more than `server.max_headers` headers, or more than
  `server.max_header_bytes` of names and values, is a 431. (The HTTP parser also bounds a header
  block that arrives in pieces: `uvicorn_options` in `app.py`.)
- **Host**: with `auth.mode: none` nothing but the Host header tells a local caller from a web
  page that rebound its own name to 127.0.0.1 (DNS rebinding), so only the allowed names pass,
  by default the loopback ones; any other Host, or none, is a 421. The header is parsed whole
  (`domain/hosts.py`): one that is not `host[:port]` is a 421 whatever is allowed.

Pure ASGI, like `limits.py`: a response body (SSE too) passes through untouched.
"""

from __future__ import annotations

import json
from collections.abc import Iterable

from starlette.types import ASGIApp, Receive, Scope, Send

from backend.domain.hosts import host_name

# `*.localhost` is loopback by RFC 6761 and browsers resolve it so without asking DNS, so no
# attacker's page can be served under such a name.
LOOPBACK_HOSTS = ("localhost", "*.localhost", "127.0.0.1", "[::1]")
ANY_HOST = "*"


class HostPolicy:
    """Which Host names are answered: exact names, `*.example.com` for the names under
    example.com, or `*` for any. A Host header that is not `host[:port]` is never answered."""

    def __init__(self, allowed: Iterable[str]) -> None:
        self.is_any = ANY_HOST in allowed
        names = [_allowed_name(name) for name in allowed if name != ANY_HOST]
        self._exact = frozenset(n for n in names if not n.startswith("*."))
        self._suffixes = tuple(n[1:] for n in names if n.startswith("*."))  # ".example.com"
        self.description = ", ".join(allowed)

    def allows(self, host_header: str | None) -> bool:
        if host_header is None:
            return self.is_any  # HTTP/1.0; HTTP/1.1's parser refuses a request without Host
        name = host_name(host_header)
        if name is None:
            return False
        return self.is_any or name in self._exact or name.endswith(self._suffixes)


def _allowed_name(name: str) -> str:
    """A configured name (`server.allowed_hosts`, checked when the settings are read)."""
    wildcard = name.startswith("*.")
    parsed = host_name(name[2:] if wildcard else name)
    if parsed is None:
        raise ValueError(f"{name!r} is not a host name")
    return f"*.{parsed}" if wildcard else parsed


def _error(status: int, code: str, message: str) -> tuple[int, bytes]:
    return status, json.dumps({"error": {"code": code, "message": message}}).encode()


class RequestHeadCheck:
    def __init__(
        self, app: ASGIApp, *, hosts: HostPolicy, max_headers: int, max_header_bytes: int
    ) -> None:
        self.app = app
        self.hosts = hosts
        self.max_headers = max_headers
        self.max_header_bytes = max_header_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        refusal = self._refusal(scope["headers"])
        if refusal is None:
            await self.app(scope, receive, send)
        elif scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008})
        else:
            await _answer(send, *refusal)

    def _refusal(self, headers: list[tuple[bytes, bytes]]) -> tuple[int, bytes] | None:
        if len(headers) > self.max_headers:
            return _error(
                431, "too_many_headers", f"the request has more than {self.max_headers} headers"
            )
        if sum(len(name) + len(value) for name, value in headers) > self.max_header_bytes:
            return _error(
                431,
                "headers_too_large",
                f"the request headers are larger than {self.max_header_bytes} bytes",
            )
        hosts = [value for name, value in headers if name == b"host"]
        host = hosts[0].decode("latin-1")[:200] if len(hosts) == 1 else None
        if not self.hosts.allows(host):
            return _error(
                421,
                "host_not_allowed",
                f"this server answers only for the host names {self.hosts.description}, "
                f"not {host!r}: open it by one of those names, or list the name under "
                "server.allowed_hosts",
            )
        return None


async def _answer(send: Send, status: int, body: bytes) -> None:
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        (b"connection", b"close"),
    ]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
