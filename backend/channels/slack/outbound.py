"""Sending to a Slack conversation: a reply as ordered mrkdwn chunks with `chat.postMessage`,
in the thread of the message it answers; a command's choices (and a question's: a line to
remember, a tool call to approve) as Block Kit buttons, marked for the one person who asked.
Slack shows no "typing…" for a bot's Web API calls, so `working` shows nothing."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any

from backend.channels.commands import Choice, CommandReply
from backend.channels.slack.api import SlackApi
from backend.channels.slack.format import slack_chunks
from backend.channels.slack.inbound import OWNER_PREFIX

SECTION_CHARS = 3_000  # Slack's limit on a section block's text
BUTTON_CHARS = 75  # on a button's label
ACTION_ID = "tally:{n}"


class ThreadReplies:
    """One Slack thread (or conversation) as the bot's `ChatReplies`."""

    def __init__(
        self,
        api: SlackApi,
        channel: str,
        *,
        thread_ts: str | None,
        person: str,
        count_reply: Callable[[], None],
    ) -> None:
        self._api = api
        self._channel = channel
        self._thread_ts = thread_ts
        self._person = person  # who the message came from: the one who answers its questions
        self._count_reply = count_reply

    def chunks(self, text: str) -> Sequence[str]:
        return slack_chunks(text)

    async def send(self, chunk: str) -> None:
        await self._api.post(self._channel, chunk, thread_ts=self._thread_ts)

    def working(self) -> AbstractAsyncContextManager[None]:
        return contextlib.nullcontext()

    async def ask(self, question: CommandReply) -> None:
        await self.say(question)
        self._count_reply()

    async def say(self, reply: CommandReply) -> None:
        """`reply` in chunks, its choices as buttons under the last."""
        chunks = self.chunks(reply.text) or [""]
        for chunk in chunks[:-1]:
            await self.send(chunk)
        last = chunks[-1]
        if not reply.choices:
            await self.send(last)
            return
        if len(last) > SECTION_CHARS:
            await self.send(last)
            last = "Choose one:"
        blocks: list[dict[str, Any]] = [
            {"type": "section", "text": {"type": "mrkdwn", "text": last}},
            {
                "type": "actions",
                "block_id": OWNER_PREFIX + self._person,
                "elements": [_button(n, choice) for n, choice in enumerate(reply.choices)],
            },
        ]
        await self._api.post(self._channel, last, thread_ts=self._thread_ts, blocks=blocks)


def _button(n: int, choice: Choice) -> dict[str, Any]:
    label = choice.label if len(choice.label) <= BUTTON_CHARS else choice.label[:74] + "…"
    return {
        "type": "button",
        "action_id": ACTION_ID.format(n=n),
        "text": {"type": "plain_text", "text": label},
        "value": choice.data,
    }
