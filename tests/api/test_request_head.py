"""The request head, checked before any route: the Host (DNS rebinding with `auth.mode: none`),
the number and size of headers, and who may read the API's description. Over real HTTP, with
raw request heads where a client library would correct them."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from backend.app import KEEP_ALIVE_S, create_app, host_policy, listening_settings, uvicorn_options
from backend.domain.hosts import host_name
from backend.providers.scripted import ScriptedProvider
from backend.settings import Settings
from tests.api.test_auth import ADMIN_KEY, bearer, make_tenant
from tests.conftest import make_settings, serve

DEADLINE_S = 60
ROUTES = ("/", "/index.html", "/api/health", "/api/memory", "/v1/models", "/docs", "/nowhere")


@dataclass(frozen=True)
class RawResponse:
    status: int
    headers: dict[str, str]
    body: bytes

    def error_code(self) -> str:
        code: str = json.loads(self.body)["error"]["code"]
        return code


async def raw_request(client: httpx.AsyncClient, head: bytes) -> RawResponse:
    """Send `head` as it is and read the answer until the server closes the connection."""
    port = client.base_url.port
    assert port is not None
    async with asyncio.timeout(DEADLINE_S):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        answer = b""
        try:
            writer.write(head)
            await writer.drain()
            while chunk := await reader.read(65536):
                answer += chunk
        except ConnectionResetError:  # closed with request bytes unread: keep what came
            if not answer:
                raise
        finally:
            writer.close()
    status_line, _, rest = answer.partition(b"\r\n")
    header_block, _, body = rest.partition(b"\r\n\r\n")
    headers = dict(
        line.decode("latin-1").lower().split(": ", 1) for line in header_block.split(b"\r\n")
    )
    return RawResponse(int(status_line.split()[1]), headers, body)


def get(path: str, *headers: str, version: str = "1.1") -> bytes:
    lines = [f"GET {path} HTTP/{version}", *headers, "Connection: close", "", ""]
    return "\r\n".join(lines).encode("latin-1")


@pytest.fixture
async def local(sqlite_url: str, tmp_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    settings = make_settings(sqlite_url, tmp_path)  # auth.mode: none
    (tmp_path / "MEMORY.md").write_text("2024-05-01|manual|the secret is 42\n")
    async with serve(create_app(settings, provider=ScriptedProvider())) as client:
        yield client


@pytest.fixture
async def keyed(
    sqlite_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[httpx.AsyncClient]:
    monkeypatch.setenv("TALLY_ADMIN_KEY", ADMIN_KEY)
    settings = make_settings(sqlite_url, tmp_path, auth={"mode": "keys"})
    async with serve(create_app(settings, provider=ScriptedProvider())) as client:
        yield client


def test_host_names_lose_port_case_and_trailing_dot() -> None:
    assert host_name("LocalHost.:8000") == "localhost"
    assert host_name("[::1]:8000") == "[::1]"
    assert host_name("[0:0:0:0:0:0:0:1]") == "[::1]"
    assert host_name("127.0.0.1") == "127.0.0.1"
    assert host_name("tally.localhost:") == "tally.localhost"


NOT_HOSTS = (
    "[::1].evil",  # what follows `]` was ignored: taken for loopback
    "[::1]evil.example",
    "[::1]:8000:1",
    "[not-an-address]",
    "[::1",
    "::1",
    "localhost:abc",
    "localhost:99999",
    "localhost@evil.example",
    "evil.example/localhost",
    "localhost evil",
    "local..host",
    ".",
    "",
)


def test_what_is_not_host_and_port_is_no_host() -> None:
    assert [value for value in NOT_HOSTS if host_name(value) is not None] == []


async def test_a_host_that_does_not_parse_is_never_taken_for_loopback(
    local: httpx.AsyncClient, keyed: httpx.AsyncClient
) -> None:
    for value in NOT_HOSTS[:-1]:
        without_keys = await raw_request(local, get("/api/memory", f"Host: {value}"))
        with_keys = await raw_request(keyed, get("/api/health", f"Host: {value}"))
        assert (without_keys.status, without_keys.error_code()) == (421, "host_not_allowed")
        assert b"42" not in without_keys.body, value
        assert with_keys.status in (400, 421), value  # the HTTP parser may refuse it first


async def test_without_keys_a_rebound_host_name_reads_nothing(local: httpx.AsyncClient) -> None:
    for path in ROUTES:
        answer = await raw_request(local, get(path, "Host: attacker.example"))
        assert (answer.status, answer.error_code()) == (421, "host_not_allowed"), path
        assert b"42" not in answer.body
        assert "attacker.example" in json.loads(answer.body)["error"]["message"]
    for host in ("attacker.example:8000", "localhost.attacker.example", "127.0.0.1.nip.io"):
        answer = await raw_request(local, get("/api/memory", f"Host: {host}"))
        assert answer.status == 421, host


async def test_without_keys_a_request_with_no_host_or_two_is_refused(
    local: httpx.AsyncClient,
) -> None:
    no_host = await raw_request(local, get("/api/memory", version="1.0"))
    two_hosts = await raw_request(local, get("/api/memory", "Host: localhost", "Host: evil.test"))
    assert (no_host.status, no_host.error_code()) == (421, "host_not_allowed")
    # HTTP/1.1 requires a Host: the parser itself refuses a request without one, or with two.
    no_host_11 = await raw_request(local, get("/api/memory"))
    assert no_host_11.status == 400 and b"42" not in no_host_11.body
    assert two_hosts.status in (400, 421) and b"42" not in two_hosts.body


async def test_without_keys_the_loopback_names_are_answered(local: httpx.AsyncClient) -> None:
    port = local.base_url.port
    hosts = ("localhost", f"localhost:{port}", f"127.0.0.1:{port}", "[::1]:8000", "tally.localhost")
    for host in hosts:
        memory = await raw_request(local, get("/api/memory", f"Host: {host}"))
        page = await raw_request(local, get("/", f"Host: {host}"))
        assert memory.status == 200 and b"the secret is 42" in memory.body, host
        assert page.status == 200, host
    models = await local.get("/v1/models")  # httpx sends Host: 127.0.0.1:<port>
    assert models.status_code == 200


async def test_with_keys_any_host_is_answered(keyed: httpx.AsyncClient) -> None:
    health = await raw_request(keyed, get("/api/health", "Host: tally.example.com"))
    memory = await raw_request(keyed, get("/api/memory", "Host: tally.example.com"))
    assert health.status == 200
    assert (memory.status, memory.error_code()) == (401, "unauthorized")


async def test_allowed_hosts_names_the_hosts_behind_a_proxy(
    sqlite_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TALLY_ADMIN_KEY", ADMIN_KEY)
    settings = make_settings(
        sqlite_url,
        tmp_path,
        auth={"mode": "keys"},
        server={"allowed_hosts": ["tally.example.com", "*.tally.example.com"]},
    )
    async with serve(create_app(settings, provider=ScriptedProvider())) as client:
        answers = {
            host: (await raw_request(client, get("/api/health", f"Host: {host}"))).status
            for host in (
                "tally.example.com:443",
                "eu.tally.example.com",
                "example.com",
                "localhost",
            )
        }
    assert answers == {
        "tally.example.com:443": 200,
        "eu.tally.example.com": 200,
        "example.com": 421,
        "localhost": 421,
    }


def test_insecure_public_without_keys_answers_any_host_name(tmp_path: Path) -> None:
    settings = make_settings("sqlite+aiosqlite:///x.db", tmp_path)
    public = listening_settings(settings, host="0.0.0.0", port=None, is_public=True)
    local = listening_settings(settings, host=None, port=None, is_public=True)
    assert host_policy(public).allows("192.168.1.20:8000")
    assert not host_policy(local).allows("attacker.example")  # still loopback: still checked


@pytest.mark.parametrize("name", ["https://a", "[::1].evil", "a b", "x:port", "*.", ""])
def test_allowed_hosts_refuses_what_is_no_host_name(name: str) -> None:
    with pytest.raises(Exception, match="host names only"):
        make_settings("sqlite+aiosqlite:///x.db", Path("."), server={"allowed_hosts": [name]})


# ---- header bounds ----------------------------------------------------------------------------


def many_headers(count: int) -> list[str]:
    return [f"X-Filler-{i}: v" for i in range(count)]


async def test_more_headers_than_the_limit_are_431(local: httpx.AsyncClient) -> None:
    # Host and Connection count too: 100 headers in all pass, 101 do not.
    at_limit = await raw_request(local, get("/api/health", "Host: localhost", *many_headers(98)))
    over = await raw_request(local, get("/api/health", "Host: localhost", *many_headers(99)))
    assert at_limit.status == 200
    assert (over.status, over.error_code()) == (431, "too_many_headers")
    assert over.headers["content-type"] == "application/json"


async def test_headers_larger_than_the_limit_are_431(local: httpx.AsyncClient) -> None:
    big = await raw_request(local, get("/api/health", "Host: localhost", "X-Big: " + "a" * 40_000))
    assert (big.status, big.error_code()) == (431, "headers_too_large")
    assert "32768 bytes" in json.loads(big.body)["error"]["message"]


async def test_huge_header_blocks_are_refused(local: httpx.AsyncClient) -> None:
    """A 100 KB header and 10,000 headers: refused by the HTTP parser (400) when the block
    arrives in pieces, else by the head check (431); never answered."""
    for head in (
        get("/api/health", "Host: localhost", "X-Big: " + "a" * 100_000),
        get("/api/health", "Host: localhost", *many_headers(10_000)),
    ):
        try:
            answer = await raw_request(local, head)
        except ConnectionResetError:
            continue  # refused before the answer could be read: never answered either
        assert answer.status in (400, 431)
        assert b'"status"' not in answer.body


async def test_a_header_block_that_never_ends_is_cut_off(local: httpx.AsyncClient) -> None:
    """The parser's bound holds while the block is still arriving: the server answers and
    closes without waiting for a block's end that would come after 60 KB."""
    unfinished = b"GET /api/health HTTP/1.1\r\nHost: localhost\r\nX-Big: " + b"a" * 60_000
    answer = await raw_request(local, unfinished)
    assert answer.status == 400


async def test_header_bounds_are_settings(sqlite_url: str, tmp_path: Path) -> None:
    settings = make_settings(
        sqlite_url, tmp_path, server={"max_headers": 10, "max_header_bytes": 2048}
    )
    async with serve(create_app(settings, provider=ScriptedProvider())) as client:
        count = await raw_request(client, get("/api/health", "Host: localhost", *many_headers(9)))
        size = await raw_request(client, get("/api/health", "Host: localhost", "X: " + "a" * 3000))
    assert (count.status, count.error_code()) == (431, "too_many_headers")
    assert (size.status, size.error_code()) == (431, "headers_too_large")


# ---- the API's description --------------------------------------------------------------------


async def test_without_keys_the_docs_are_public(local: httpx.AsyncClient) -> None:
    for path in ("/docs", "/redoc", "/openapi.json"):
        assert (await local.get(path)).status_code == 200, path


async def test_with_keys_the_schema_needs_an_admin_key_and_the_doc_pages_are_off(
    keyed: httpx.AsyncClient,
) -> None:
    chat_key = (await make_tenant(keyed, "acme"))["key"]
    tenant_admin_key = (await make_tenant(keyed, "acme", scope="admin"))["key"]
    anonymous = await keyed.get("/openapi.json")
    as_chat = await keyed.get("/openapi.json", headers=bearer(chat_key))
    as_tenant_admin = await keyed.get("/openapi.json", headers=bearer(tenant_admin_key))
    as_operator = await keyed.get("/openapi.json", headers=bearer(ADMIN_KEY))
    assert (anonymous.status_code, anonymous.json()["error"]["code"]) == (401, "unauthorized")
    assert (as_chat.status_code, as_chat.json()["error"]["code"]) == (403, "forbidden")
    assert as_tenant_admin.status_code == 200
    assert "/api/chat/send" in as_operator.json()["paths"]
    for path in ("/docs", "/redoc"):
        page = await keyed.get(path, headers=bearer(ADMIN_KEY))
        assert page.status_code == 404, path


async def test_public_docs_turns_the_docs_on_with_keys(
    sqlite_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TALLY_ADMIN_KEY", ADMIN_KEY)
    settings = make_settings(
        sqlite_url, tmp_path, auth={"mode": "keys"}, server={"public_docs": True}
    )
    async with serve(create_app(settings, provider=ScriptedProvider())) as client:
        answers: dict[str, Any] = {
            path: (await client.get(path)).status_code
            for path in ("/docs", "/redoc", "/openapi.json")
        }
    assert answers == {"/docs": 200, "/redoc": 200, "/openapi.json": 200}


def test_an_idle_connection_outlives_what_clients_and_proxies_in_front_wait() -> None:
    """httpx reuses a connection idle up to 5 s, nginx an upstream one up to 60 s: the server
    must not be closing it as they send on it (a read error for the request)."""
    assert uvicorn_options(Settings())["timeout_keep_alive"] == KEEP_ALIVE_S > 60
