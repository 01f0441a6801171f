"""A failed vendor call in words that name the provider, its URL and the cause.

Both SDKs reach their vendor through httpx2, so a failure below HTTP looks alike under either:
the SDK's error wraps httpx2's, which wraps the socket's (`ConnectionRefusedError`,
`socket.gaierror`, `ssl.SSLError`...). The cause is found by walking `__cause__` and
`__context__`. Messages carry no key and no message content: a vendor's own error text is kept
(one line, shortened) except for 401/403, where some vendors echo part of the key.
"""

from __future__ import annotations

import socket
import ssl
from collections.abc import Mapping
from typing import TypeVar

import httpx2

from backend.errors import (
    ProviderAuthFailed,
    ProviderBadRequest,
    ProviderBadResponse,
    ProviderError,
    ProviderTimeout,
    ProviderUnavailable,
)
from backend.providers.endpoints import Endpoint
from backend.providers.resilience import error_for_status

# What `json.loads` raises for an answer that is not JSON, not UTF-8, holds a number too long
# to convert (a ValueError too), or nests deeper than Python recurses: an unusable answer.
UNPARSABLE = (ValueError, RecursionError)
MAX_VENDOR_MESSAGE = 300
MAX_CHAIN = 32  # causes walked; a real chain has fewer than ten

STATUS_WORDS: dict[int, str] = {
    400: "bad request",
    408: "request timeout",
    409: "conflict",
    413: "request too large",
    422: "unprocessable request",
    429: "rate limited",
    500: "server error",
    502: "bad gateway",
    503: "service unavailable",
    504: "gateway timeout",
    529: "overloaded",
}

# OpenSSL's reasons when the other end answered a TLS handshake in plain HTTP.
PLAIN_HTTP_REASONS = frozenset(
    {"WRONG_VERSION_NUMBER", "RECORD_LAYER_FAILURE", "HTTP_REQUEST", "PACKET_LENGTH_TOO_LONG"}
)

E = TypeVar("E", bound=BaseException)


def causes(exc: BaseException) -> list[BaseException]:
    """`exc` and every exception it was raised from or while handling, nearest first."""
    found: list[BaseException] = []
    pending: list[BaseException] = [exc]
    while pending and len(found) < MAX_CHAIN:
        current = pending.pop(0)
        if any(current is seen for seen in found):
            continue
        found.append(current)
        pending += [linked for linked in (current.__cause__, current.__context__) if linked]
        if isinstance(current, BaseExceptionGroup):
            pending += current.exceptions
    return found


def first_cause(exc: BaseException, kind: type[E]) -> E | None:
    return next((cause for cause in causes(exc) if isinstance(cause, kind)), None)


# ---- below HTTP: no connection, no TLS, no answer in time -------------------------------------


def transport_error(
    endpoint: Endpoint, exc: BaseException, *, has_response: bool, is_timeout: bool = False
) -> ProviderError:
    """The error for a call that got no usable HTTP answer. `has_response` tells a connection
    that never opened (unavailable) from a stream cut after it began (bad response)."""
    timeout = first_cause(exc, httpx2.TimeoutException)
    if timeout is not None or is_timeout:
        words = _timeout_words(endpoint, timeout, has_response=has_response)
        return ProviderTimeout(endpoint.provider, words, url=endpoint.url)
    if has_response:
        words = "the stream was cut before it finished"
        return ProviderBadResponse(endpoint.provider, words, url=endpoint.url)
    return ProviderUnavailable(endpoint.provider, _connect_words(endpoint, exc), url=endpoint.url)


def _timeout_words(
    endpoint: Endpoint, timeout: httpx2.TimeoutException | None, *, has_response: bool
) -> str:
    if isinstance(timeout, httpx2.ConnectTimeout):
        return f"no connection within {endpoint.connect_timeout_s:g} s (connect_timeout_s)"
    if isinstance(timeout, httpx2.ReadTimeout):
        if has_response:
            return f"the stream stalled for {endpoint.timeout_s:g} s (timeout_s)"
        return f"connected, but no answer within {endpoint.timeout_s:g} s (timeout_s)"
    if isinstance(timeout, httpx2.WriteTimeout):
        return f"could not send the request within {endpoint.timeout_s:g} s (timeout_s)"
    if isinstance(timeout, httpx2.PoolTimeout):
        return f"no free connection within {endpoint.timeout_s:g} s (timeout_s)"
    return "the request timed out"


def _connect_words(endpoint: Endpoint, exc: BaseException) -> str:
    chain = causes(exc)
    for cause in chain:  # the order of the checks matters, not the depth of the cause
        if isinstance(cause, ConnectionRefusedError):
            return "connection refused"
    for cause in chain:
        if isinstance(cause, socket.gaierror):
            return f"cannot resolve host {endpoint.host}"
    for cause in chain:
        if isinstance(cause, ssl.SSLError):
            return _tls_words(endpoint, cause)
    for cause in chain:
        if isinstance(cause, ConnectionResetError):
            return "the connection was reset"
        if isinstance(cause, OSError) and cause.strerror:
            return f"cannot connect: {cause.strerror}"
        if isinstance(cause, httpx2.RemoteProtocolError):
            return "the server closed the connection without answering"
    innermost = chain[-1]
    return f"cannot connect: {_one_line(str(innermost)) or type(innermost).__name__}"


def _tls_words(endpoint: Endpoint, error: ssl.SSLError) -> str:
    if isinstance(error, ssl.SSLCertVerificationError):
        detail = error.verify_message or error.reason or "verification failed"
        return f"TLS failure: the certificate of {endpoint.host} was not accepted ({detail})"
    reason = error.reason or _one_line(str(error))
    if reason in PLAIN_HTTP_REASONS:
        return f"TLS failure ({reason}): the server answers plain HTTP; use an http:// base_url"
    return f"TLS failure ({reason})"


# ---- HTTP errors -----------------------------------------------------------------------------


def status_error(
    endpoint: Endpoint,
    status: int,
    *,
    vendor_message: str,
    vendor_code: str | None,
    model: str,
    path: str,
    retry_after: float | None,
) -> ProviderError:
    """The error for an HTTP error status. 401/403 name the key's environment variable; 404
    says whether the model or the base_url is wrong."""
    provider, url = endpoint.provider, endpoint.url
    if status in (401, 403):
        return ProviderAuthFailed(provider, _key_words(endpoint, status), url=url)
    if status == 404:
        if _names_model(vendor_message, vendor_code, model):
            return ProviderBadRequest(provider, f'model "{model}" not found (404)', url=url)
        words = f"wrong base_url: nothing at POST {path} (404)"
        return ProviderBadRequest(provider, words, url=url)
    default = "server error" if status >= 500 else "request refused"
    words = f"{STATUS_WORDS.get(status, default)} ({status})"
    vendor_message = _one_line(vendor_message)
    if vendor_message:
        words += f": {vendor_message}"
    return error_for_status(provider, status, words, retry_after=retry_after, url=url)


def _key_words(endpoint: Endpoint, status: int) -> str:
    if endpoint.api_key_env is None:
        return f"the server wants a key ({status}); name its variable in api_key_env"
    if not endpoint.has_key:
        return f"{endpoint.api_key_env} is not set, and the server wants a key ({status})"
    return f"the key in {endpoint.api_key_env} was rejected ({status})"


def _names_model(vendor_message: str, vendor_code: str | None, model: str) -> bool:
    """Whether a 404 is about the model: vendors name the model they did not find (OpenAI
    also says `model_not_found`), while a wrong path gets a generic "not found"."""
    return bool(model and model in vendor_message) or "model" in (vendor_code or "")


def vendor_message(response: httpx2.Response) -> tuple[str, str | None]:
    """The `(message, code)` of a vendor's JSON error body: `{"error": {"message", "code"}}`
    (OpenAI, Anthropic, vLLM), `{"message": ...}`, or `{"error": "..."}` (Ollama). Nothing from
    a body that is not JSON, such as a proxy's HTML page."""
    try:
        body = response.json()
    except (ValueError, httpx2.StreamError):  # not JSON, or a body never read
        return "", None
    if isinstance(body, Mapping):
        error = body.get("error", body)
        if isinstance(error, str):
            return error, None
        if isinstance(error, Mapping):
            message, code = error.get("message"), error.get("code")
            return (
                message if isinstance(message, str) else "",
                code if isinstance(code, str) else None,
            )
    return "", None


def _one_line(text: str) -> str:
    line = " ".join(text.split())
    if len(line) > MAX_VENDOR_MESSAGE:
        return line[: MAX_VENDOR_MESSAGE - 1] + "…"
    return line
