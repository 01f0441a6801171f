"""The one exception hierarchy. Every error has a stable `code` and an HTTP `status`.

Errors are turned into HTTP responses (and SSE `error` events) in one place, `api/errors.py`.
An error is never stored as a chat message.
"""

from __future__ import annotations

from collections.abc import Sequence


class TallyError(Exception):
    """Base of every error Tally raises on purpose."""

    code = "internal_error"
    status = 500

    def __init__(self, message: str, *, code: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code


class ConfigError(TallyError):
    """The configuration file is missing, unreadable or invalid. `problems` are its
    `key.path: reason` lines; `partial`, the settings without the keys in error, lets the
    checks that need settings (models, tools, templates) report theirs in the same pass."""

    code = "config_invalid"

    def __init__(
        self, message: str, *, problems: Sequence[str] = (), partial: object = None
    ) -> None:
        super().__init__(message)
        self.problems = list(problems)
        self.partial = partial


class InvalidInput(TallyError):
    code = "invalid_request"
    status = 422


class PayloadTooLarge(InvalidInput):
    code = "payload_too_large"
    status = 413


class NotFound(TallyError):
    code = "not_found"
    status = 404


class SessionNotFound(NotFound):
    code = "session_not_found"

    def __init__(self, session_id: str) -> None:
        super().__init__(f"session {session_id!r} does not exist")


class Conflict(TallyError):
    code = "conflict"
    status = 409


class Unauthorized(TallyError):
    code = "unauthorized"
    status = 401


class TenantDisabled(TallyError):
    """A valid key of a tenant an operator disabled: refused until it is enabled again."""

    code = "tenant_disabled"
    status = 403


class ContextTooLong(TallyError):
    """The newest user message alone does not fit the model's context budget."""

    code = "context_too_long"
    status = 413


class TurnCancelled(TallyError):
    code = "cancelled"
    status = 499


class ToolLoopExceeded(TallyError):
    code = "tool_loop_exceeded"
    status = 502


class StorageUnavailable(TallyError):
    """The database cannot serve now (read-only or full, unreachable, out of connections):
    503 with `Retry-After`; nothing was stored half-way and a retry can succeed."""

    code = "storage_unavailable"
    status = 503
    retry_after = 5.0


class ProviderError(TallyError):
    """The LLM provider failed. `retry_after` (seconds) when the vendor said when to retry.

    The message names the provider, the endpoint's `url` when known, and the cause:
    `myvendor (http://127.0.0.1:9/v1): connection refused`. It never holds a key or any
    message content.
    """

    code = "provider_error"
    status = 502
    is_retryable = False

    def __init__(
        self,
        provider: str,
        message: str,
        *,
        retry_after: float | None = None,
        url: str | None = None,
    ) -> None:
        super().__init__(f"{provider} ({url}): {message}" if url else f"{provider}: {message}")
        self.provider = provider
        self.url = url
        self.retry_after = retry_after


class ProviderUnavailable(ProviderError):
    """5xx, overloaded or connection failure: worth retrying or falling back."""

    code = "provider_unavailable"
    status = 503
    is_retryable = True


class ProviderRateLimited(ProviderUnavailable):
    code = "provider_rate_limited"
    status = 429


class ProviderTimeout(ProviderUnavailable):
    code = "provider_timeout"
    status = 504


class ProviderAuthFailed(ProviderError):
    code = "provider_auth_failed"
    status = 502


class ProviderBadRequest(ProviderError):
    code = "provider_bad_request"
    status = 502


class ProviderBadResponse(ProviderError):
    """The stream was cut midway, malformed, or the reply was empty."""

    code = "provider_bad_response"
    status = 502
    is_retryable = True


class EmptyReply(ProviderBadResponse):
    code = "empty_reply"
