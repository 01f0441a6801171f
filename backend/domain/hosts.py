"""Host names as an HTTP `Host` header carries them (RFC 9110 §7.2: `host [":" port]`, the host
an IP literal in brackets, an IPv4 address or a registered name), read strictly: `[::1].evil`,
`localhost@evil`, `localhost:abc` and the like are no host at all, never one taken for
another by a parser that stops reading early."""

from __future__ import annotations

import ipaddress
import re

MAX_NAME_CHARS = 253
_NAME = re.compile(r"[a-z0-9_](?:[a-z0-9_-]*[a-z0-9_])?(?:\.[a-z0-9_](?:[a-z0-9_-]*[a-z0-9_])?)*")


def host_name(value: str) -> str | None:
    """The host a Host header value names, lower-cased, without port or trailing dot (IPv6 in
    its short form: `[0:0::1]:80` is `[::1]`); None when the value is not `host[:port]`."""
    host, port = _split(value.strip().lower())
    if host is None or not _is_port(port):
        return None
    if host.startswith("["):
        try:
            address = ipaddress.IPv6Address(host[1:-1])
        except ValueError:
            return None
        return f"[{address.compressed}]"
    host = host[:-1] if host.endswith(".") else host
    if len(host) > MAX_NAME_CHARS or not _NAME.fullmatch(host):
        return None
    return host


def _split(value: str) -> tuple[str | None, str | None]:
    """(host, port or None); the host None when nothing but a port may follow an IP literal."""
    if value.startswith("["):
        end = value.find("]")
        if end < 0:
            return None, None
        rest = value[end + 1 :]
        if rest and not rest.startswith(":"):
            return None, None
        return value[: end + 1], rest[1:] if rest else None
    host, colon, port = value.rpartition(":")
    return (host, port) if colon else (value, None)


def _is_port(port: str | None) -> bool:
    """No port, an empty one (RFC 3986 allows `host:`), or a number up to 65535."""
    if port is None or port == "":
        return True
    return port.isascii() and port.isdigit() and len(port) <= 5 and int(port) <= 65535
