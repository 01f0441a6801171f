"""A bot's long connection: the SDK's websocket client (`lark_oapi.ws.Client`) connects out to
Feishu (no public address needed) and receives events as protobuf frames; it acknowledges a
frame with what our handler returns, once the handler has returned, which is after the event
is kept: a frame not acknowledged is delivered again. The SDK reconnects a lost connection.

The SDK runs every client on one event loop of its module, made at import; its `start()`
blocks that loop forever and it has no way to stop. So every Feishu bot of the process runs on
one loop of ours in a thread of its own (set as the module's loop), the connection is opened
there by the steps `start()` takes, and `stop` turns reconnecting off and closes it. Its
handlers are synchronous and block that loop while they run: ours waits (briefly) for the
event to be kept on the app's loop.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import logging
import threading
from collections.abc import Callable, Coroutine
from concurrent.futures import Future
from typing import Any

import lark_oapi as lark
import lark_oapi.ws.client as sdk_client
from lark_oapi.event.dispatcher_handler import EventDispatcherHandler
from lark_oapi.ws.exception import ClientException

from backend.channels.backoff import Backoff
from backend.channels.base import ChannelStatus
from backend.settings.channels_feishu import FeishuSettings

log = logging.getLogger(__name__)

KEEP_TIMEOUT_S = 30.0  # an event not kept by then is not acknowledged: Feishu sends it again
STOP_TIMEOUT_S = 10.0

# (the event's JSON) -> what the acknowledgement carries; raises when it was not kept
Receive = Callable[[bytes], Coroutine[Any, Any, Any]]
OnError = Callable[[str, BaseException], None]

_loop: asyncio.AbstractEventLoop | None = None
_loop_lock = threading.Lock()
# The loop the SDK made at import: still some thread's current loop, perhaps, so it is kept
# (dropped, it would be collected unclosed) rather than closed under whoever holds it.
_replaced: list[asyncio.AbstractEventLoop] = [sdk_client.loop]


@atexit.register
def _close_replaced() -> None:
    """At exit, the SDK's own loop closed if nothing ran on it (else it warns, unclosed)."""
    for loop in _replaced:
        if not loop.is_running() and not loop.is_closed():
            loop.close()


def sdk_loop() -> asyncio.AbstractEventLoop:
    """The one loop every SDK websocket client of this process runs on, in its own thread."""
    global _loop
    with _loop_lock:
        if _loop is None:
            loop = asyncio.new_event_loop()
            loop.set_exception_handler(_quiet)
            if sdk_client.loop not in _replaced:
                _replaced.append(sdk_client.loop)
            sdk_client.loop = loop  # the module-global loop its clients schedule their tasks on
            threading.Thread(target=loop.run_forever, name="feishu-ws", daemon=True).start()
            _loop = loop
        return _loop


def _quiet(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
    """The SDK's receive task of a stopped client ends with the close it was told of; noted."""
    log.debug("feishu ws: %s", context.get("message"), exc_info=context.get("exception"))


class LongConnection:
    def __init__(
        self,
        settings: FeishuSettings,
        *,
        status: ChannelStatus,
        receive: Receive,
        on_error: OnError,
    ) -> None:
        self._settings = settings
        self._status = status
        self._receive = receive
        self._on_error = on_error
        self._client: Any = None
        self._tasks: list[asyncio.Task[None]] = []

    async def run(self) -> None:
        """Connected until cancelled (the SDK reconnects a lost connection)."""
        loop = sdk_loop()
        app_loop = asyncio.get_running_loop()
        await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(self._start(app_loop), loop))
        try:
            await asyncio.Event().wait()
        finally:
            stopping = asyncio.run_coroutine_threadsafe(self._stop(), loop)
            with contextlib.suppress(Exception):
                await asyncio.wait_for(asyncio.wrap_future(stopping), STOP_TIMEOUT_S)
            self._status.is_connected = False

    # ---- on the SDK's loop ---------------------------------------------------------------

    async def _start(self, app_loop: asyncio.AbstractEventLoop) -> None:
        handler = _Events(lambda body: self._receive_on(app_loop, body))
        # Made here: its constructor starts a task on the running loop.
        client = lark.ws.Client(
            self._settings.app_id,
            self._settings.app_secret() or "",
            event_handler=handler,
            domain=self._settings.api_base(),
            log_level=lark.LogLevel.WARNING,
        )
        client.on_reconnecting = lambda: self._connected(app_loop, False)
        client.on_reconnected = lambda: self._connected(app_loop, True)
        self._client = client
        self._tasks.append(asyncio.get_running_loop().create_task(self._hold(client, app_loop)))

    async def _hold(self, client: Any, app_loop: asyncio.AbstractEventLoop) -> None:
        """`start()`'s steps without its blocking: connect (retried with backoff), then ping."""
        backoff = Backoff()
        while True:
            try:
                await client._connect()
                break
            except Exception as exc:  # refused credentials (ClientException) or unreachable
                app_loop.call_soon_threadsafe(self._on_error, "connect", exc)
                if not isinstance(exc, ClientException):
                    await client._disconnect()
                await backoff.wait()
        self._connected(app_loop, True)
        await client._ping_loop()

    async def _stop(self) -> None:
        client = self._client
        for task in self._tasks:
            task.cancel()
        if client is None:
            return
        client._auto_reconnect = False

        async def stopped() -> None:  # a reconnect already under way opens nothing more
            raise ClientException(-1, "stopped")

        client._connect = stopped
        await client._disconnect()

    def _connected(self, app_loop: asyncio.AbstractEventLoop, connected: bool) -> None:
        def note() -> None:
            self._status.is_connected = connected

        app_loop.call_soon_threadsafe(note)

    def _receive_on(self, app_loop: asyncio.AbstractEventLoop, body: bytes) -> Any:
        """The handler, on the SDK's loop: the event kept on the app's loop, then returned
        from (the SDK acknowledges it); raising, it is answered 500 and comes again."""
        future: Future[Any] = asyncio.run_coroutine_threadsafe(self._receive(body), app_loop)
        try:
            return future.result(KEEP_TIMEOUT_S)
        except Exception as exc:  # not kept (a full disk, a database away): said in the status
            app_loop.call_soon_threadsafe(self._on_error, "receive", exc)
            raise


class _Events(EventDispatcherHandler):  # type: ignore[misc]  # every event to us, unparsed
    def __init__(self, receive: Callable[[bytes], Any]) -> None:
        super().__init__()
        self._receive_event = receive

    def _do_without_validation(self, payload: bytes) -> Any:
        return self._receive_event(payload)
