"""`tally chat`: a chat in the terminal, in-process, streaming tokens as they arrive.

The terminal keeps the main thread: `input()` edits the line with readline (arrow keys,
history), and Ctrl-C raises KeyboardInterrupt there at once: at the prompt it quits, while a
reply streams it cancels the turn (the words shown so far are stored `incomplete` by the turn
machinery) and the prompt comes back. The services run on an event loop of their own thread,
so their background work (overflow summaries) goes on while the prompt waits.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sys
import threading
from collections.abc import Callable, Coroutine, Iterator
from concurrent.futures import Future
from contextlib import AbstractAsyncContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Self, TypeVar

from backend.chat.runtime import TenantRuntime
from backend.chat.service import ChatService
from backend.chat.turn_handle import TurnHandle
from backend.cli.terminal_markdown import MarkdownStream, render_markdown
from backend.composition.build import build_services
from backend.composition.services import Services
from backend.domain.events import (
    RetryScheduled,
    TextDelta,
    ThinkingDelta,
    ToolFinished,
    ToolStarted,
    TurnCompleted,
    TurnFailed,
)
from backend.domain.inbound import InboundMessage
from backend.domain.messages import Session, StoredMessage, UserInput
from backend.domain.tenants import DEFAULT_TENANT
from backend.domain.wording import count
from backend.errors import NotFound, SessionNotFound, TallyError, TurnCancelled
from backend.settings import Settings

TENANT = DEFAULT_TENANT
PROMPT = "you> "
RECAP_MESSAGES = 10  # `--session`: the newest messages of the window shown before the prompt
RECAP_CHARS = 500
HISTORY_FILE = "chat_history"  # in the data dir: the lines typed, for Up-arrow in later chats
HISTORY_LINES = 1000
STOP_TIMEOUT_S = 10.0

T = TypeVar("T")


def run_terminal_chat(settings: Settings, *, session_id: str | None) -> int:
    # The terminal is the chat's screen: its events already say what a warning line would (a
    # failed or cancelled turn, the demo provider), and a log line would land inside a reply.
    logging.getLogger().setLevel(logging.ERROR)
    with (
        _EventLoopThread() as loop,
        loop.entered(build_services(settings)) as services,
    ):
        chat = loop.run(_open(services, session_id))
        chat.greet()
        with _line_editing(Path(settings.data_dir) / HISTORY_FILE):
            while (line := _read_line()) is not None:
                if line:
                    inbound = InboundMessage(
                        TENANT, "api", UserInput(text=line), session_id=chat.session.id
                    )
                    _ask(loop, services.chat, inbound)
    return 0


@dataclass(frozen=True)
class _Chat:
    session: Session
    runtime: TenantRuntime
    recap: list[StoredMessage] | None  # None: a new session

    def greet(self) -> None:
        print(f"Tally · model {self.runtime.model.name} · session {self.session.id}")
        if self.runtime.is_demo:
            hint = self.runtime.demo_hint
            print(f"(the built-in demo provider answers; to talk to a real model, {hint})")
        if self.recap is not None:
            _show_recap(self.recap, assistant=self.runtime.settings.persona.name)
        print("Type a message. Ctrl-C stops a reply; Ctrl-C or Ctrl-D at the prompt quits.\n")


async def _open(services: Services, session_id: str | None) -> _Chat:
    runtime = await services.runtimes.get(TENANT)
    if session_id is None:
        session = await services.sessions.create(tenant_id=TENANT, channel="api")
        return _Chat(session, runtime, recap=None)
    try:
        session, window = await services.messages.session_with_window(
            tenant_id=TENANT, session_id=session_id, limit=RECAP_MESSAGES
        )
    except SessionNotFound as exc:
        raise NotFound(
            f"there is no session {session_id!r} (tenant {TENANT}): check the id, or run "
            "`tally chat` without --session to start a new one",
            code="session_not_found",
        ) from exc
    return _Chat(session, runtime, recap=window)


def _show_recap(messages: list[StoredMessage], *, assistant: str) -> None:
    if not messages:
        print("(this session has no messages yet)")
        return
    print(f"The last {len(messages)} messages of this session:")
    failed: StoredMessage | None = None  # a user message whose turn failed, said after it
    for message in messages:
        if failed is not None and message.turn_id != failed.turn_id:
            _show_failure(failed)
            failed = None
        role = "you" if message.role == "user" else assistant
        if message.status == "incomplete":
            role += " (incomplete)"
        text = message.content
        if len(text) > RECAP_CHARS:
            text = text[: RECAP_CHARS - 1] + "…"
        if message.role == "assistant":
            text = render_markdown(text, is_styled=sys.stdout.isatty())
        if message.images:
            text += f" [{count(len(message.images), 'image')}]"
        print(f"  {role}: " + text.replace("\n", "\n    "))  # later lines indented under it
        failed = message if message.failure is not None else failed
    if failed is not None:
        _show_failure(failed)
    print()


def _show_failure(message: StoredMessage) -> None:
    """How a turn ended, as the terminal said it then, after what it kept of the reply."""
    assert message.failure is not None
    if message.failure.code == TurnCancelled.code:
        print("    [cancelled]")
    else:
        print(f"    [error {message.failure.code}: {message.failure.message}]")


def _read_line() -> str | None:
    """The next line typed, or None when the user quits (Ctrl-D, or Ctrl-C at the prompt)."""
    try:
        return input(PROMPT).strip()
    except (EOFError, KeyboardInterrupt):
        print()
        return None


def _ask(loop: _EventLoopThread, chat: ChatService, inbound: InboundMessage) -> None:
    """Play one turn to the terminal. A Ctrl-C while it runs cancels it; this returns when the
    turn has ended (a second Ctrl-C meanwhile quits the chat)."""
    turn = _Turn(chat, inbound)
    played = loop.submit(turn.play())
    try:
        played.result()
    except KeyboardInterrupt:
        loop.call(turn.cancel)
        played.result()


class _Turn:
    """One turn on the event loop. Both methods run there, so a `cancel` that arrives before
    the turn has started is not lost."""

    def __init__(self, chat: ChatService, inbound: InboundMessage) -> None:
        self._chat = chat
        self._inbound = inbound
        self._handle: TurnHandle | None = None
        self._is_cancel_requested = False

    def cancel(self) -> None:
        self._is_cancel_requested = True
        if self._handle is not None:
            self._handle.cancel()

    async def play(self) -> None:
        try:
            self._handle = await self._chat.start(self._inbound)
        except TallyError as exc:  # refused before it started: too long, the request limit
            sys.stdout.write(f"[error {exc.code}: {exc.message}]\n\n")
            return
        if self._is_cancel_requested:
            self._handle.cancel()
        markdown = MarkdownStream(is_styled=sys.stdout.isatty())
        async for event in self._handle.events():
            _show(event, markdown)


def _show(event: object, markdown: MarkdownStream) -> None:
    out = sys.stdout
    if isinstance(event, TextDelta):
        out.write(markdown.feed(event.text))
        out.flush()
        return
    out.write(markdown.finish())  # whatever follows the words starts with no style open
    if isinstance(event, ThinkingDelta):
        out.write(f"\x1b[2m{event.text}\x1b[0m")
    elif isinstance(event, ToolStarted):
        out.write(f"\n[tool {event.call.name} {event.call.arguments}]")
    elif isinstance(event, ToolFinished):
        out.write(f" → {event.result[:200]}\n")
    elif isinstance(event, RetryScheduled):
        out.write(f"\n[retrying in {event.delay_s:.1f} s: {event.message or event.reason}]\n")
    elif isinstance(event, TurnCompleted):
        out.write("\n\n")
    elif isinstance(event, TurnFailed) and event.code == TurnCancelled.code:
        out.write("\n[cancelled]\n\n")
    elif isinstance(event, TurnFailed):
        out.write(f"\n[error {event.code}: {event.message}]\n\n")
    out.flush()


@contextmanager
def _line_editing(history_path: Path) -> Iterator[None]:
    """Readline at a terminal's prompt, with the lines typed in earlier chats (kept, readable
    by the owner only, in the data dir). History is a convenience: a file it cannot read or
    write is no reason to fail the chat."""
    if not sys.stdin.isatty():
        yield
        return
    try:
        import readline
    except ImportError:  # a Python built without readline: plain input()
        yield
        return
    with contextlib.suppress(OSError):
        readline.read_history_file(history_path)
    readline.set_history_length(HISTORY_LINES)
    try:
        yield
    finally:
        with contextlib.suppress(OSError):
            history_path.parent.mkdir(parents=True, exist_ok=True)
            readline.write_history_file(history_path)
            os.chmod(history_path, 0o600)


class _EventLoopThread:
    """An asyncio loop on a daemon thread. `run` waits on the calling thread for a coroutine
    on the loop; a Ctrl-C interrupts that wait, never the loop itself."""

    def __init__(self) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="tally-chat-loop", daemon=True
        )

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        with contextlib.suppress(Exception):
            self.run(self._loop.shutdown_asyncgens())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(STOP_TIMEOUT_S)
        if not self._thread.is_alive():
            self._loop.close()

    def submit(self, coroutine: Coroutine[Any, Any, T]) -> Future[T]:
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop)

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        return self.submit(coroutine).result()

    def call(self, callback: Callable[[], object]) -> None:
        self._loop.call_soon_threadsafe(callback)

    @contextmanager
    def entered(self, manager: AbstractAsyncContextManager[T]) -> Iterator[T]:
        """`async with manager` on the loop, for the length of a `with` block on this thread.
        What ends the block is not thrown into `manager`: a KeyboardInterrupt raised inside a
        task would stop the loop before `manager` had closed."""
        value = self.run(manager.__aenter__())
        try:
            yield value
        finally:
            self.run(manager.__aexit__(None, None, None))
