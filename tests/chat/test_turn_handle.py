"""A turn's final event reaches its caller only once the turn no longer counts as running, so
that a cancel sent after the caller read it finds nothing to cancel (with Redis, the turn's
end is recorded there first)."""

from __future__ import annotations

import asyncio

from backend.chat.turn_handle import TurnHandle, TurnRequest
from backend.domain.events import TextDelta, TurnCompleted
from backend.domain.messages import Usage, UserInput


def completed(handle: TurnHandle) -> TurnCompleted:
    return TurnCompleted("s", handle.turn_id, 1, 2, "Hello.", Usage())


async def test_the_final_event_waits_for_the_turn_to_be_released() -> None:
    handle = TurnHandle(TurnRequest(tenant_id="t", session_id="s", user_input=UserInput("hi")))
    handle.hold_final()
    result = asyncio.create_task(handle.result())
    handle.emit(TextDelta("Hello."))
    handle.emit(completed(handle))
    for _ in range(10):  # the task runs as far as it can
        await asyncio.sleep(0)
    assert not result.done()

    handle.release()

    assert isinstance(await result, TurnCompleted)


async def test_a_handle_not_held_gives_its_final_event_at_once() -> None:
    handle = TurnHandle(TurnRequest(tenant_id="t", session_id="s", user_input=UserInput("hi")))
    handle.emit(completed(handle))

    assert isinstance(await handle.result(), TurnCompleted)
