"""Errors become HTTP responses here, and only here: `{"error": {"code", "message"}}`.

A storage fault (the database down, full, read-only, out of connections) is an expected state,
not a bug: it is answered 503 `storage_unavailable` by a handler of its own exception classes,
logged as one line, and the connection is kept. Starlette re-raises whatever reaches the
catch-all handler (so the server logs a traceback and drops the connection); only bugs go there.
"""

from __future__ import annotations

import json
import logging
import math
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from sqlalchemy.exc import SQLAlchemyError
from starlette.exceptions import HTTPException as StarletteHTTPException

from backend.api.json_response import StorableJSONResponse
from backend.api.text_fields import INVALID_TEXT
from backend.errors import TallyError
from backend.storage.faults import as_storage_fault

log = logging.getLogger(__name__)

# Pydantic refuses a lone surrogate itself (`string_unicode`); our fields refuse a NUL.
TEXT_ERRORS = {INVALID_TEXT, "string_unicode"}
# What the database layer raises (SQLAlchemy wraps every driver's errors; a socket's are OSError):
# handled where the response is sent and the connection kept, never by the catch-all.
STORAGE_ERRORS = (SQLAlchemyError, OSError)
HTTP_CODES = {
    400: "invalid_request",
    401: "unauthorized",
    404: "not_found",
    405: "method_not_allowed",
    413: "payload_too_large",
    415: "unsupported_media_type",
}


def error_response(
    status: int, code: str, message: str, headers: dict[str, str] | None = None
) -> JSONResponse:
    return StorableJSONResponse(
        {"error": {"code": code, "message": message}}, status_code=status, headers=headers
    )


def retry_after_header(seconds: float | None) -> dict[str, str]:
    """`Retry-After` for a wait of `seconds`, rounded up: a client told to wait never comes
    back too early (none when there is no wait)."""
    return {"Retry-After": str(max(1, math.ceil(seconds)))} if seconds else {}


def install_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(TallyError, _tally_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    for storage_error in STORAGE_ERRORS:
        app.add_exception_handler(storage_error, _storage_error)
    app.add_exception_handler(Exception, _unexpected)


def refused(
    request: Request,
    status: int,
    code: str,
    message: str,
    headers: dict[str, str] | None = None,
) -> JSONResponse:
    """The answer to a request Tally refuses, and its one log line: an operator sees bad
    requests, wrong keys and quota refusals in the log without an access log per request."""
    level = logging.INFO if status < 500 else logging.WARNING
    path = request.url.path
    log.log(level, "refused %s %s: %d %s: %s", request.method, path, status, code, message)
    return error_response(status, code, message, headers)


def _tally_response(request: Request, exc: TallyError) -> JSONResponse:
    headers = retry_after_header(getattr(exc, "retry_after", None))
    return refused(request, exc.status, exc.code, exc.message, headers or None)


async def _tally_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, TallyError)
    return _tally_response(request, exc)


async def _validation_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    errors = exc.errors()
    undecodable = next((error for error in errors if error.get("type") == "json_invalid"), None)
    if undecodable is not None:
        message = _describe_invalid_json(undecodable, exc.body)
        return refused(request, 422, "invalid_json", message)
    problems = [_describe(error) for error in errors[:5]]
    is_text = any(error.get("type") in TEXT_ERRORS for error in errors)
    code = INVALID_TEXT if is_text else "invalid_request"
    return refused(request, 422, code, "; ".join(problems) or "invalid request")


def _describe_invalid_json(error: Any, document: Any) -> str:
    """FastAPI reports a body that is not JSON as `loc: ("body", <offset>)` with the decoder's
    message in `ctx`, and the text as the exception's body: say the line and column."""
    reason = str((error.get("ctx") or {}).get("error", "not valid JSON"))
    offset = error.get("loc", ())[-1:]
    if isinstance(document, bytes):
        document = document.decode("utf-8", "replace")
    if not offset or not isinstance(offset[0], int) or not isinstance(document, str):
        return f"invalid JSON: {reason}"
    where = json.JSONDecodeError(reason, document, offset[0])
    return f"invalid JSON at line {where.lineno}, column {where.colno}: {reason}"


def _describe(error: Any) -> str:
    location = ".".join(str(part) for part in error.get("loc", ()) if part != "body")
    message = str(error.get("msg", "invalid"))
    return f"{location}: {message}" if location else message


async def _http_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    code = HTTP_CODES.get(exc.status_code, "http_error")
    return refused(request, exc.status_code, code, str(exc.detail), dict(exc.headers or {}))


async def _storage_error(request: Request, exc: Exception) -> JSONResponse:
    """A storage fault is one warning line and a 503; another database error is a bug, logged
    with its traceback, and still answered on a connection that stays open."""
    fault = as_storage_fault(exc)
    if fault is not None:
        return _storage_fault(request, fault)
    return _internal_error(request, exc)


async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
    fault = as_storage_fault(exc)  # a fault wrapped in another error, if ever one comes here
    if fault is not None:
        return _storage_fault(request, fault)
    return _internal_error(request, exc)


def _storage_fault(request: Request, fault: TallyError) -> JSONResponse:
    log.warning("storage fault on %s %s: %s", request.method, request.url.path, fault.message)
    headers = retry_after_header(getattr(fault, "retry_after", None))
    return error_response(fault.status, fault.code, fault.message, headers or None)


def _internal_error(request: Request, exc: Exception) -> JSONResponse:
    log.error("unhandled error on %s %s", request.method, request.url.path, exc_info=exc)
    return error_response(500, "internal_error", "the server failed unexpectedly")
