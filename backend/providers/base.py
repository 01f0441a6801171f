"""The seam to every LLM vendor: one protocol, one adapter per wire protocol."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Protocol

from backend.domain.events import ProviderEvent
from backend.domain.requests import ChatRequest


class ChatProvider(Protocol):
    """Streams one model call as domain events.

    Contract: yields any number of `TextDelta`, `ThinkingDelta`, `ToolCallRequested` (each
    complete, arguments parsed), `ThinkingBlockDone` (each block of reasoning, complete, for
    the tool loop to send back), at most one `UsageReported`, then exactly one `Finished`.
    Failures raise a `ProviderError` subclass (from `backend.errors`), never an SDK exception.
    A reply with no text and no tool call raises `EmptyReply`.
    """

    name: str

    def stream(self, request: ChatRequest) -> AsyncIterator[ProviderEvent]: ...

    async def aclose(self) -> None: ...
