"""Sending to a Discord channel through discord.py's REST client: a reply as ordered messages
within 2,000 characters, each a reply to the message it answers (`message_reference`), no
mention in a model's words pinging anyone; "typing…" while the model works; a command's
choices as buttons only the person asked may press. Rate limits (429 with `retry_after`, the
`X-RateLimit-*` buckets, the global limit) are waited out inside discord.py's HTTP client."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass

import aiohttp

from backend.channels.commands import CommandReply
from backend.channels.discord.format import MAX_CHARS, discord_chunks
from backend.channels.discord.sdk import discord

log = logging.getLogger(__name__)

TYPING_EVERY_S = 8.0  # Discord shows "typing…" for about ten seconds per call
CHANNEL_MESSAGE = 4  # interaction responses: a new message
UPDATE_MESSAGE = 7  # ...: the pressed message edited
EPHEMERAL = 64  # a message flag: seen by the one who pressed only
BUTTON_LABEL_CHARS = 80
CUSTOM_ID_CHARS = 100


@dataclass(frozen=True, slots=True)
class Origin:
    """The message a reply answers, and who sent it (the one its buttons are for)."""

    channel_id: str
    message_id: str
    guild_id: str | None
    author_id: str


def custom_id(owner: str, data: str) -> str:
    """A button's id: whose it is, and what pressing it sends back."""
    return f"{owner}:{data}"[:CUSTOM_ID_CHARS]


def owner_and_data(value: str) -> tuple[str, str]:
    owner, _, data = value.partition(":")
    return owner, data


class Outbox:
    """One bot's way out to its channels (its logged-in REST client)."""

    def __init__(self, client: discord.Client) -> None:
        self._client = client
        self._session: aiohttp.ClientSession | None = None

    async def send(self, origin: Origin, text: str, view: discord.ui.View | None = None) -> None:
        channel = self._client.get_partial_messageable(
            int(origin.channel_id), guild_id=int(origin.guild_id) if origin.guild_id else None
        )
        reference = discord.MessageReference(
            message_id=int(origin.message_id),
            channel_id=int(origin.channel_id),
            guild_id=int(origin.guild_id) if origin.guild_id else None,
            fail_if_not_exists=False,  # deleted meanwhile: the reply is sent all the same
        )
        if view is None:
            await channel.send(text, reference=reference, allowed_mentions=_NO_PINGS)
        else:
            await channel.send(text, reference=reference, allowed_mentions=_NO_PINGS, view=view)

    @contextlib.asynccontextmanager
    async def typing(self, channel_id: str) -> AsyncIterator[None]:
        """ "typing…" until the block ends; failing to show it is no reason to fail a reply."""

        async def keep_typing() -> None:
            while True:
                with contextlib.suppress(discord.HTTPException, aiohttp.ClientError, OSError):
                    await self._client.http.send_typing(int(channel_id))
                await asyncio.sleep(TYPING_EVERY_S)

        task = asyncio.create_task(keep_typing())
        try:
            yield
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def respond(
        self, interaction_id: str, token: str, text: str, *, to_presser_only: bool
    ) -> None:
        """Answer a button press: a note to the presser only, or the pressed message edited to
        say what became of it, its buttons gone."""
        if to_presser_only:
            params = discord.webhook.async_.interaction_message_response_params(
                type=CHANNEL_MESSAGE, content=text[:MAX_CHARS], flags=_ephemeral()
            )
        else:
            params = discord.webhook.async_.interaction_message_response_params(
                type=UPDATE_MESSAGE, content=text[:MAX_CHARS], view=None
            )
        await discord.webhook.async_.async_context.get().create_interaction_response(
            int(interaction_id), token, session=self._http_session(), params=params
        )

    def _http_session(self) -> aiohttp.ClientSession:
        if self._session is None:
            self._session = aiohttp.ClientSession()
        return self._session

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()


def _ephemeral() -> discord.MessageFlags:
    flags = discord.MessageFlags()
    flags.ephemeral = True
    return flags


_NO_PINGS = discord.AllowedMentions.none()


def buttons(reply: CommandReply, owner: str) -> discord.ui.View | None:
    """`reply`'s choices as buttons for `owner`. The view is stopped before it is sent: presses
    come back through the gateway into the inbox, not to discord.py's view store."""
    if not reply.choices:
        return None
    view = discord.ui.View(timeout=None)
    for choice in reply.choices[:25]:  # Discord takes 5 rows of 5
        view.add_item(
            discord.ui.Button(
                label=choice.label[:BUTTON_LABEL_CHARS] or "?",
                custom_id=custom_id(owner, choice.data),
                style=discord.ButtonStyle.secondary,
            )
        )
    view.stop()
    return view


class ChannelReplies:
    """One Discord channel, answering one message, as the bot's `ChatReplies`."""

    def __init__(self, outbox: Outbox, origin: Origin, *, count_reply: Callable[[], None]) -> None:
        self._outbox = outbox
        self._origin = origin
        self._count_reply = count_reply

    def chunks(self, text: str) -> Sequence[str]:
        return discord_chunks(text)

    async def send(self, chunk: str) -> None:
        await self._outbox.send(self._origin, chunk)

    def working(self) -> AbstractAsyncContextManager[None]:
        return self._outbox.typing(self._origin.channel_id)

    async def ask(self, question: CommandReply) -> None:
        await self.say(question)  # its choices as buttons
        self._count_reply()

    async def say(self, reply: CommandReply) -> None:
        """A command's reply in chunks, its choices as buttons under the last."""
        chunks = discord_chunks(reply.text) or ["…"]
        for index, chunk in enumerate(chunks):
            last = index == len(chunks) - 1
            view = buttons(reply, self._origin.author_id) if last else None
            await self._outbox.send(self._origin, chunk, view)
