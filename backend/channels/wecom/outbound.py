"""Sending to a person's chat with a WeCom self-built app: the reply in order as markdown
messages (what the WeCom client renders) or as text (`markdown: false`, for people who read
the app in WeChat, which shows no app markdown), each within 2,048 bytes. Rate limits are
waited out by the API client; a command's choices are a numbered list (a self-built app's
messages carry no buttons that call back here)."""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Any

from backend.channels.commands import CommandReply
from backend.channels.wecom.api import WeComApi
from backend.channels.wecom.format import ROBOT_MAX_BYTES, wecom_chunks

MAX_BUTTONS = 6  # a button_interaction card's
TITLE_CHARS = 36
BUTTON_CHARS = 10
CARD_TEXT_CHARS = 1_000

if TYPE_CHECKING:  # the robot's SDK is loaded only for a robot
    from backend.channels.wecom.robot import RobotConnection


class PersonReplies:
    """One person's chat with the app as the bot's `ChatReplies` (no "typing…" sign)."""

    def __init__(self, api: WeComApi, user_id: str, *, markdown: bool = True) -> None:
        self._api = api
        self._user_id = user_id
        self._markdown = markdown

    def chunks(self, text: str) -> Sequence[str]:
        return wecom_chunks(text)

    async def send(self, chunk: str) -> None:
        kind = "markdown" if self._markdown else "text"
        await self._api.send(self._user_id, {"msgtype": kind, kind: {"content": chunk}})

    def working(self) -> AbstractAsyncContextManager[None]:
        return contextlib.nullcontext()

    async def ask(self, question: CommandReply) -> None:
        # Never asked (the app's chats cannot approve); said as text all the same.
        for chunk in self.chunks(question.text):
            await self.send(chunk)

    async def say(self, reply: CommandReply) -> None:
        for chunk in self.chunks(numbered(reply)):
            await self.send(chunk)


class RobotReplies:
    """One chat of an intelligent robot (a person's, or a group's): each message a finished
    stream message (what WeCom shows a robot's answer as, Markdown rendered) answering the
    message's `req_id` on the long connection."""

    def __init__(self, robot: RobotConnection, frame: dict[str, Any]) -> None:
        self._robot = robot
        self._frame = frame

    def chunks(self, text: str) -> Sequence[str]:
        return wecom_chunks(text, limit=ROBOT_MAX_BYTES)

    async def send(self, chunk: str) -> None:
        await self._robot.reply_stream(self._frame, chunk)

    def working(self) -> AbstractAsyncContextManager[None]:
        return contextlib.nullcontext()

    async def ask(self, question: CommandReply) -> None:
        for chunk in self.chunks(question.text):
            await self.send(chunk)

    async def say(self, reply: CommandReply) -> None:
        """A command's reply; its choices as a template card's buttons (a numbered list too,
        answered `/forget <number>`, where there are more than a card holds)."""
        if reply.choices and len(reply.choices) <= MAX_BUTTONS:
            await self._robot.reply_card(self._frame, choice_card(reply))
            return
        for chunk in self.chunks(numbered(reply)):
            await self.send(chunk)


def choice_card(reply: CommandReply) -> dict[str, Any]:
    """A `button_interaction` card: the reply and its numbered choices, a button each (its
    key the choice's data, which the press brings back)."""
    title, _, rest = numbered(reply).partition("\n")  # the list says how to answer by text too
    return {
        "card_type": "button_interaction",
        "main_title": {"title": title[:TITLE_CHARS]},
        "sub_title_text": rest.strip()[:CARD_TEXT_CHARS],
        "button_list": [
            {"text": f"{n}. {c.label}"[:BUTTON_CHARS], "style": 1, "key": c.data}
            for n, c in enumerate(reply.choices, start=1)
        ],
        "task_id": f"tally-{secrets.token_hex(8)}",
    }


def result_card(task_id: str, said: str) -> dict[str, Any]:
    """What a pressed card becomes: what the press did, and no more buttons."""
    return {
        "card_type": "text_notice",
        "main_title": {"title": said.split("\n", 1)[0][:TITLE_CHARS]},
        "sub_title_text": said[:CARD_TEXT_CHARS],
        "task_id": task_id,
    }


def numbered(reply: CommandReply) -> str:
    """A command's reply with its choices as a numbered list (answered `/forget <number>`)."""
    if not reply.choices:
        return reply.text
    listed = "\n".join(f"{n}. {c.label}" for n, c in enumerate(reply.choices, start=1))
    return f"{reply.text}\n\n{listed}\n\nSend /forget <number>."
