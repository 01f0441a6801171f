"""Request body size limit, enforced while the body streams in (chunked bodies too)."""

from __future__ import annotations

import json

from starlette.types import ASGIApp, Message, Receive, Scope, Send


class BodyTooLarge(Exception):
    pass


class BodySizeLimit:
    def __init__(self, app: ASGIApp, *, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self._rejection = json.dumps(
            {
                "error": {
                    "code": "payload_too_large",
                    "message": f"the request body is larger than {max_bytes} bytes",
                }
            }
        ).encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers", [])).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
            await self._reject(send)
            return
        received = 0
        is_too_large = is_answered = False

        async def limited_receive() -> Message:
            nonlocal received, is_too_large
            message = await receive()
            received += len(message.get("body", b""))
            if received > self.max_bytes:
                is_too_large = True
                raise BodyTooLarge
            return message

        async def guarded_send(message: Message) -> None:
            # Whatever the app answers to a body cut short (FastAPI turns the exception into
            # a 400), the client gets the 413 that explains it.
            nonlocal is_answered
            if not is_too_large:
                await send(message)
            elif message["type"] == "http.response.start":
                await self._reject(send)
            is_answered = True

        try:
            await self.app(scope, limited_receive, guarded_send)
        except BodyTooLarge:
            if not is_answered:
                await self._reject(send)

    async def _reject(self, send: Send) -> None:
        headers = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(self._rejection)).encode()),
        ]
        await send({"type": "http.response.start", "status": 413, "headers": headers})
        await send({"type": "http.response.body", "body": self._rejection})
