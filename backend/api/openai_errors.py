"""OpenAI-shaped errors for the `/v1` routes: Tally's own error body (code and message), plus
the `type` OpenAI SDKs map to their exceptions, whatever raised the error (auth, validation, the
turn)."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from fastapi import Request, Response
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute

from backend.api.json_response import StorableJSONResponse

# OpenAI's error `type` by HTTP status; other 4xx are invalid requests, 5xx server errors.
ERROR_TYPES = {401: "authentication_error", 403: "permission_error", 429: "rate_limit_error"}


def error_type(status: int) -> str:
    return ERROR_TYPES.get(status, "server_error" if status >= 500 else "invalid_request_error")


class OpenAIErrorRoute(APIRoute):
    """Every error of these routes, wherever raised (auth, validation, the turn), is rendered
    by the app's one error mapping and then gains OpenAI's `type`."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handle = super().get_route_handler()

        async def handle_with_error_type(request: Request) -> Response:
            try:
                response = await handle(request)
            except Exception as exc:
                render = _error_handler(request, exc)
                if render is None:
                    raise
                response = await render(request, exc)
            return _with_error_type(response)

        return handle_with_error_type


ErrorHandler = Callable[[Request, Exception], Awaitable[Response]]


def _error_handler(request: Request, exc: Exception) -> ErrorHandler | None:
    """The app's handler for `exc` (all of Tally's are async), looked up as Starlette does."""
    handlers: dict[Any, ErrorHandler] = request.app.exception_handlers
    return next((handlers[cls] for cls in type(exc).__mro__ if cls in handlers), None)


def _with_error_type(response: Response) -> Response:
    if response.status_code < 400 or not isinstance(response, JSONResponse):
        return response
    body = json.loads(bytes(response.body))
    if not isinstance(body, dict) or not isinstance(body.get("error"), dict):
        return response
    body["error"]["type"] = error_type(response.status_code)
    kept = {
        k: v for k, v in response.headers.items() if k not in ("content-length", "content-type")
    }
    return StorableJSONResponse(body, status_code=response.status_code, headers=kept)
