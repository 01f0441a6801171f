"""Sending to a QQ chat: passive replies to the message that asked (`msg_id`), each with the
next `msg_seq` of that message, as Markdown where the bot is allowed it (msg_type 2) and as
text otherwise (msg_type 0).

QQ refuses a second message with the same msg_id and msg_seq, so each number is claimed in
the database before it is used (`ReplySequence`): a reply resumed after a crash continues the
sequence instead of repeating a number. QQ takes passive replies to a message for a while only
(5 minutes in a group, 60 in a private chat) and a few of them (`format.MAX_REPLIES`); beyond
that it refuses the send, which is noted as the update's failure.
"""

from __future__ import annotations

import contextlib
import logging
import secrets
from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager

from backend.channels.commands import CommandReply
from backend.channels.qq.format import qq_chunks
from backend.channels.qq.openapi import QQApi, QQError
from backend.storage.channel_updates import ChannelUpdateRepository

log = logging.getLogger(__name__)

TEXT, MARKDOWN = 0, 2  # msg_type
DEDUPLICATED = 40054005  # QQ: "消息被去重" (this msg_id and msg_seq were sent already)
MAX_SEQ = 100  # far beyond what QQ accepts for one message


class ReplySequence:
    """The msg_seq numbers of one bot's replies, claimed once each across processes."""

    def __init__(self, updates: ChannelUpdateRepository, *, tenant_id: str, bot: str) -> None:
        self._updates = updates
        self._tenant_id = tenant_id
        self._bot = bot
        self._last: dict[str, int] = {}  # msg_id -> the last number this process claimed

    async def next(self, msg_id: str) -> int:
        mine = secrets.token_hex(8)
        for seq in range(self._last.get(msg_id, 0) + 1, MAX_SEQ + 1):
            first = await self._updates.claim_proof(
                tenant_id=self._tenant_id,
                bot=self._bot,
                proof=f"qq-msg-seq:{msg_id}:{seq}",
                platform_id=mine,
            )
            if first == mine:
                self._last[msg_id] = seq
                return seq
        raise RuntimeError(f"qq: {MAX_SEQ} replies to message {msg_id} already")


class QQReplies:
    """One QQ chat as the bot's `ChatReplies` (QQ bots have no "typing…" sign)."""

    def __init__(
        self,
        api: QQApi,
        sequence: ReplySequence,
        *,
        group: bool,
        openid: str,
        msg_id: str,
        event_id: str = "",
        markdown: bool = False,
    ) -> None:
        self._api = api
        self._sequence = sequence
        self._group = group
        self._openid = openid
        self._msg_id = msg_id
        self._event_id = event_id
        self._markdown = markdown

    def chunks(self, text: str) -> Sequence[str]:
        return qq_chunks(text)

    async def send(self, chunk: str) -> None:
        body: dict[str, object] = {"msg_id": self._msg_id}
        if self._markdown:
            body |= {"msg_type": MARKDOWN, "markdown": {"content": chunk}}
        else:
            body |= {"msg_type": TEXT, "content": chunk}
        body["msg_seq"] = await self._sequence.next(self._msg_id)
        try:
            await self._api.send(group=self._group, openid=self._openid, body=body)
        except QQError as exc:
            # A retry of a send QQ had taken before it failed (a 5xx, a timeout): QQ refuses
            # the same msg_id and msg_seq again, which says the message arrived.
            if exc.code != DEDUPLICATED:
                raise
            log.info("qq: msg_seq %s of %s was delivered already", body["msg_seq"], self._msg_id)

    def working(self) -> AbstractAsyncContextManager[None]:
        return contextlib.nullcontext()

    async def ask(self, question: CommandReply) -> None:
        # Never with buttons (QQ's keyboards need the platform's approval): the question's
        # text says which command answers it (/remember <id>, /discard <id>).
        for chunk in self.chunks(question.text):
            await self.send(chunk)

    async def say(self, reply: CommandReply) -> None:
        """A command's reply; its choices as a numbered list, in one message."""
        text = reply.text
        if reply.choices:
            listed = "\n".join(f"{n}. {c.label}" for n, c in enumerate(reply.choices, start=1))
            text += f"\n\n{listed}\n\nSend /forget <number>."
        for chunk in self.chunks(text):
            await self.send(chunk)
