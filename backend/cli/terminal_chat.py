"""`tally chat`: a chat in the terminal, in-process, streaming tokens as they arrive."""

from __future__ import annotations

import asyncio
import sys

from backend.chat.turn import TurnRequest
from backend.composition import build_services
from backend.domain.events import (
    RetryScheduled,
    TextDelta,
    ThinkingDelta,
    ToolFinished,
    ToolStarted,
    TurnCompleted,
    TurnFailed,
)
from backend.domain.messages import UserInput
from backend.settings import Settings

TENANT = "default"


async def run_terminal_chat(settings: Settings, *, session_id: str | None) -> int:
    async with build_services(settings) as services:
        if session_id is None:
            session = await services.sessions.create(tenant_id=TENANT, channel="api")
        else:
            session = await services.sessions.get(tenant_id=TENANT, session_id=session_id)
        runtime = await services.runtimes.get(TENANT)
        print(f"Tally · model {runtime.model.name} · session {session.id}")
        if runtime.is_demo:
            print("(demo provider: no LLM key is configured)")
        print("Type a message; an empty line or Ctrl-D quits.\n")
        while True:
            line = await asyncio.to_thread(_read_line)
            if not line:
                return 0
            handle = services.turns.start(TurnRequest(TENANT, session.id, UserInput(text=line)))
            async for event in handle.events():
                _show(event)


def _read_line() -> str:
    try:
        return input("you> ").strip()
    except EOFError:
        return ""


def _show(event: object) -> None:
    out = sys.stdout
    if isinstance(event, TextDelta):
        out.write(event.text)
    elif isinstance(event, ThinkingDelta):
        out.write(f"\x1b[2m{event.text}\x1b[0m")
    elif isinstance(event, ToolStarted):
        out.write(f"\n[tool {event.call.name} {event.call.arguments}]")
    elif isinstance(event, ToolFinished):
        out.write(f" → {event.result[:200]}\n")
    elif isinstance(event, RetryScheduled):
        out.write(f"\n[retrying in {event.delay_s:.1f} s: {event.reason}]\n")
    elif isinstance(event, TurnCompleted):
        out.write("\n\n")
    elif isinstance(event, TurnFailed):
        out.write(f"\n[error {event.code}: {event.message}]\n\n")
    out.flush()
