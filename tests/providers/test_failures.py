"""Failed calls name the provider, its URL and the cause, under both adapters: the real SDKs
against real sockets on 127.0.0.1 (a closed port, a silent port, fake vendor servers)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass

import pytest

from backend.domain.requests import ChatRequest
from backend.errors import (
    ProviderAuthFailed,
    ProviderBadRequest,
    ProviderError,
    ProviderRateLimited,
    ProviderTimeout,
    ProviderUnavailable,
)
from backend.providers.anthropic import AnthropicProvider
from backend.providers.base import ChatProvider
from backend.providers.openai_compatible import OpenAICompatibleProvider
from tests.fakes import FakeServer, HttpError, SilentServer
from tests.fakes.anthropic_server import FakeAnthropicServer
from tests.fakes.openai_server import FakeOpenAIServer
from tests.providers.conftest import provider_settings

NAME = "myvendor"
GENEROUS_S = 60.0  # the machine is busy: only the timeout under test is small
TINY_S = 0.2


@dataclass(frozen=True)
class Vendor:
    """One wire protocol: its adapter, its fake server, and how its base_url is written."""

    kind: str
    adapter: Callable[..., ChatProvider]
    server: Callable[..., FakeServer]
    path: str  # what follows host:port in a correct base_url

    def url(self, port: int, *, scheme: str = "http", host: str = "127.0.0.1") -> str:
        return f"{scheme}://{host}:{port}{self.path}"


VENDORS = [
    Vendor("openai_compatible", OpenAICompatibleProvider, FakeOpenAIServer, "/v1"),
    Vendor("anthropic", AnthropicProvider, FakeAnthropicServer, ""),
]


@pytest.fixture(params=VENDORS, ids=lambda vendor: vendor.kind)
def vendor(request: pytest.FixtureRequest) -> Vendor:
    vendor: Vendor = request.param
    return vendor


Make = Callable[..., ChatProvider]


@pytest.fixture
async def make(vendor: Vendor) -> AsyncIterator[Make]:
    """Builds the vendor's adapter named "myvendor"; keywords override `ProviderSettings`."""
    made: list[ChatProvider] = []

    def build(**overrides: object) -> ChatProvider:
        values = {"timeout_s": GENEROUS_S, "connect_timeout_s": GENEROUS_S} | overrides
        made.append(vendor.adapter(NAME, provider_settings(vendor.kind, **values)))
        return made[-1]

    yield build
    for provider in made:
        await provider.aclose()


@pytest.fixture
def server(vendor: Vendor) -> Iterator[FakeServer]:
    with vendor.server(known_models={"test-model"}) as server:
        yield server


async def failure_of(provider: ChatProvider, request: ChatRequest) -> ProviderError:
    with pytest.raises(ProviderError) as caught:
        async for _event in provider.stream(request):
            pass
    return caught.value


# ---- below HTTP --------------------------------------------------------------------------


async def test_refused_connection_names_the_url(
    vendor: Vendor, make: Make, hello: ChatRequest, refused_port: int
) -> None:
    url = vendor.url(refused_port)

    error = await failure_of(make(base_url=url), hello)

    assert isinstance(error, ProviderUnavailable)
    assert error.code == "provider_unavailable"
    assert error.message == f"myvendor ({url}): connection refused"


async def test_unresolvable_host_is_named(vendor: Vendor, make: Make, hello: ChatRequest) -> None:
    url = f"https://nope.invalid{vendor.path}"  # .invalid never resolves (RFC 6761)

    error = await failure_of(make(base_url=url), hello)

    assert isinstance(error, ProviderUnavailable)
    assert error.message == f"myvendor ({url}): cannot resolve host nope.invalid"


async def test_tls_to_a_plain_http_port_is_a_tls_failure(
    vendor: Vendor, make: Make, server: FakeServer, hello: ChatRequest
) -> None:
    url = vendor.url(server.port, scheme="https")

    error = await failure_of(make(base_url=url), hello)

    assert isinstance(error, ProviderUnavailable)
    assert error.message.startswith(f"myvendor ({url}): TLS failure (")
    assert error.message.endswith("the server answers plain HTTP; use an http:// base_url")


async def test_untrusted_certificate_is_a_tls_failure(
    vendor: Vendor, make: Make, hello: ChatRequest
) -> None:
    with vendor.server(tls=True) as server:
        error = await failure_of(make(base_url=server.base_url), hello)

    assert isinstance(error, ProviderUnavailable)
    assert error.message == (
        f"myvendor ({server.base_url}): TLS failure: the certificate of 127.0.0.1 was not "
        "accepted (self-signed certificate)"
    )


async def test_server_that_never_answers_is_a_read_timeout(
    vendor: Vendor, make: Make, hello: ChatRequest
) -> None:
    with SilentServer() as silent:
        url = vendor.url(silent.port)
        error = await failure_of(make(base_url=url, timeout_s=TINY_S), hello)

    assert isinstance(error, ProviderTimeout)
    assert error.code == "provider_timeout"
    assert error.message == f"myvendor ({url}): connected, but no answer within 0.2 s (timeout_s)"


async def test_handshake_never_answered_is_a_connect_timeout(
    vendor: Vendor, make: Make, hello: ChatRequest
) -> None:
    with SilentServer() as silent:  # TCP connects; the TLS hello is never answered
        url = vendor.url(silent.port, scheme="https")
        error = await failure_of(make(base_url=url, connect_timeout_s=TINY_S), hello)

    assert isinstance(error, ProviderTimeout)
    assert error.message == (f"myvendor ({url}): no connection within 0.2 s (connect_timeout_s)")


async def test_credentials_in_the_url_are_not_shown(
    vendor: Vendor, make: Make, hello: ChatRequest, refused_port: int
) -> None:
    port = refused_port
    url = f"http://user:s3cret@127.0.0.1:{port}{vendor.path}?token=t0ken"

    error = await failure_of(make(base_url=url), hello)

    assert error.message == f"myvendor ({vendor.url(port)}): connection refused"


# ---- HTTP errors -------------------------------------------------------------------------


async def test_rejected_key_names_its_environment_variable(
    vendor: Vendor,
    make: Make,
    server: FakeServer,
    hello: ChatRequest,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("MYVENDOR_API_KEY", "sk-wrong-4242")
    server.api_key = "sk-right"
    provider = make(base_url=server.base_url, api_key_env="MYVENDOR_API_KEY")

    error = await failure_of(provider, hello)

    assert isinstance(error, ProviderAuthFailed)
    assert error.code == "provider_auth_failed"
    assert error.message == (
        f"myvendor ({server.base_url}): the key in MYVENDOR_API_KEY was rejected (401)"
    )


async def test_forbidden_key_names_its_environment_variable(
    vendor: Vendor,
    make: Make,
    server: FakeServer,
    hello: ChatRequest,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("MYVENDOR_API_KEY", "sk-limited-4242")
    # Some vendors echo the key they refused; the message must not carry it on.
    server.push(HttpError(403, "key sk-limited-4242 may not use this model"))
    provider = make(base_url=server.base_url, api_key_env="MYVENDOR_API_KEY")

    error = await failure_of(provider, hello)

    assert isinstance(error, ProviderAuthFailed)
    assert error.message.endswith(": the key in MYVENDOR_API_KEY was rejected (403)")
    assert "sk-limited" not in error.message


async def test_key_missing_from_the_environment_is_named(
    vendor: Vendor, make: Make, server: FakeServer, hello: ChatRequest
) -> None:
    server.api_key = "sk-right"
    provider = make(base_url=server.base_url, api_key_env="MYVENDOR_API_KEY")

    error = await failure_of(provider, hello)

    assert error.message.endswith(": MYVENDOR_API_KEY is not set, and the server wants a key (401)")


async def test_unknown_model_is_named(
    vendor: Vendor, make: Make, server: FakeServer, hello: ChatRequest
) -> None:
    request = ChatRequest(model="no-such-model", system="", messages=hello.messages)

    error = await failure_of(make(base_url=server.base_url), request)

    assert isinstance(error, ProviderBadRequest)
    assert error.message == f'myvendor ({server.base_url}): model "no-such-model" not found (404)'


async def test_wrong_base_url_is_named(
    vendor: Vendor, make: Make, server: FakeServer, hello: ChatRequest
) -> None:
    wrong = f"http://127.0.0.1:{server.port}/api"  # the model is right, the path is not
    call_path = {"openai_compatible": "/api/chat/completions", "anthropic": "/api/v1/messages"}

    error = await failure_of(make(base_url=wrong), hello)

    assert isinstance(error, ProviderBadRequest)
    assert error.message == (
        f"myvendor ({wrong}): wrong base_url: nothing at POST {call_path[vendor.kind]} (404)"
    )


async def test_rate_limit_keeps_the_vendor_message(
    vendor: Vendor, make: Make, server: FakeServer, hello: ChatRequest
) -> None:
    server.push(HttpError(429, "slow down", retry_after="3"))

    error = await failure_of(make(base_url=server.base_url), hello)

    assert isinstance(error, ProviderRateLimited)
    assert error.retry_after == 3.0
    assert error.message == f"myvendor ({server.base_url}): rate limited (429): slow down"


async def test_server_error_keeps_the_vendor_message(
    vendor: Vendor, make: Make, server: FakeServer, hello: ChatRequest
) -> None:
    server.push(HttpError(503, "upstream is\nrestarting"))

    error = await failure_of(make(base_url=server.base_url), hello)

    assert isinstance(error, ProviderUnavailable)
    assert error.message == (
        f"myvendor ({server.base_url}): service unavailable (503): upstream is restarting"
    )
