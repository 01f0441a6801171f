"""The commands a chat user sends a bot (`/new`, `/stop`, `/summary`, `/memory`, `/forget`,
`/link`, `/unlink`, `/remember`, `/discard`), the same on every platform: each reads or changes
this chat's session and memory, and says what it did. A platform renders the reply (and
`/forget`'s choices, as buttons or a numbered list answered with `/forget <n>`); a tool call
waiting for approval, and a line proposed to remember, is a question with buttons. Also what a
platform's message asks of a bot: a command, a turn, or nothing, and who may ask
(`allow_from`)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field

from backend.channels.context import ChannelServices
from backend.chat.linking import MemoryNotPersonal
from backend.domain.decisions import ToolDecision
from backend.domain.events import ToolApprovalRequested
from backend.domain.ids import approval_ref
from backend.errors import TallyError
from backend.memory.base import MemoryEntryNotFound
from backend.memory.entries import MemoryEntry
from backend.storage.identities import NotLinked
from backend.storage.pending_memory import (
    Proposal,
    ProposalDecided,
    ProposalExpired,
    ProposalNotFound,
)

FORGET_CHOICES = 10
FORGET_PREFIX = "forget:"
APPROVE_PREFIX = "approve:"
DENY_PREFIX = "deny:"
REMEMBER_PREFIX = "remember:"
DISCARD_PREFIX = "discard:"
ARGUMENT_SHOWN = 200  # characters of each argument of a call in an approval question
FORGOTTEN = "Forgotten."
LINK_CODE = (
    "Your link code is {code}. Within 10 minutes, send /link {code} from your other account "
    "(another chat app, or the Link panel of the web page); the code works once."
)
LINKED = "Linked: this chat and your {others} other account{s} now share one memory."
UNLINKED = (
    "Unlinked: from now on I remember what is said here on its own. What I remembered stays "
    "with your other accounts."
)
HELP = (
    "I am {persona}, a chat assistant that remembers: older turns of our conversation are "
    "summarized into memory.\n\n"
    "/new — start a fresh conversation (the old one is kept)\n"
    "/stop — stop the reply being written\n"
    "/summary — what this conversation is about so far\n"
    "/memory — what I remember\n"
    "/forget — remove something I remember\n"
    "/link — one memory with your other accounts (here, on other apps, on the web)\n"
    "/unlink — this chat on its own again\n"
    "/help — this text"
)
DESCRIPTIONS = {
    "new": "Start a fresh conversation",
    "stop": "Stop the reply being written",
    "summary": "What this conversation is about so far",
    "memory": "What I remember",
    "forget": "Remove something I remember",
    "link": "One memory with your other accounts",
    "unlink": "This chat on its own again",
    "help": "What I can do",
}


@dataclass(frozen=True, slots=True)
class Command:
    name: str  # new, stop, summary, memory, forget, link, unlink, remember, discard; or: help
    argument: str = ""


@dataclass(frozen=True, slots=True)
class Ask:
    text: str  # the message without the bot's @mention


Request = Command | Ask | None  # None: ignore the message


def is_allowed(names: Iterable[str], allow_from: list[str]) -> bool:
    """Whether a sender known by `names` (ids, usernames) may talk to the bot. `allow_from`
    names them, with or without @; ["*"] lets anyone in and an empty list nobody: a bot is
    closed until its operator opens it."""
    if "*" in allow_from:
        return True
    wanted = {entry.strip().removeprefix("@").casefold() for entry in allow_from}
    return any(name.casefold() in wanted for name in names if name)


@dataclass(frozen=True, slots=True)
class ChatRef:
    """One platform chat of one tenant's bot, as the chat service names it."""

    tenant_id: str
    channel: str
    external_key: str
    user_key: str | None


@dataclass(frozen=True, slots=True)
class Choice:
    label: str
    data: str  # what pressing it sends back


@dataclass(frozen=True, slots=True)
class CommandReply:
    text: str
    choices: list[Choice] = field(default_factory=list)


class Commands:
    def __init__(self, services: ChannelServices) -> None:
        self._services = services

    async def run(self, command: Command, chat: ChatRef) -> CommandReply:
        if command.name == "forget" and command.argument:
            return await self._forget_numbered(command.argument, chat)
        if command.name in ("link", "unlink"):
            return CommandReply(await self._link(command, chat))
        if command.name in ("remember", "discard") and command.argument:
            approve = command.name == "remember"
            return CommandReply(await self._answer_proposal(command.argument, approve, chat))
        handler = {
            "new": self._new,
            "stop": self._stop,
            "summary": self._summary,
            "memory": self._memory,
            "forget": self._forget,
        }.get(command.name)
        if handler is None:  # /start, /help, and any word we do not know
            return await self._help(chat)
        return await handler(chat)

    async def press(self, data: str, chat: ChatRef) -> str:
        """A choice pressed: `/forget`'s entry to remove, or a decision on a tool call."""
        if data.startswith(FORGET_PREFIX):
            return await self._delete(data[len(FORGET_PREFIX) :], chat)
        if data.startswith((REMEMBER_PREFIX, DISCARD_PREFIX)):
            verb, _, proposal_id = data.partition(":")
            return await self._answer_proposal(proposal_id, verb + ":" == REMEMBER_PREFIX, chat)
        if answers_a_question(data):
            return await self._decide(data, chat)
        return "That button is no longer in use."

    async def _answer_proposal(self, proposal_id: str, approve: bool, chat: ChatRef) -> str:
        """A line proposed to remember, kept or dropped by the person it is about."""
        if chat.user_key is None:
            return "That is answered in a private chat with me."
        try:
            await self._services.proposals.decide(
                tenant_id=chat.tenant_id,
                proposal_id=proposal_id,
                approve=approve,
                user_key=chat.user_key,
            )
        except ProposalNotFound:
            return "That is not waiting for your answer."
        except ProposalDecided:
            return "That was answered already."
        except ProposalExpired:
            return "Too late: it went unanswered, so I did not keep it."
        except TallyError as exc:  # memory cannot be written now: the question stays open
            return f"That could not be kept just now ({exc.code}); answer again in a moment."
        return "Remembered." if approve else "Discarded: I will not remember that."

    async def _decide(self, data: str, chat: ChatRef) -> str:
        verb, turn_id, call_ref = [*data.split(":", 2), "", ""][:3]
        approved = verb + ":" == APPROVE_PREFIX
        session = await self._session(chat)  # a button decides only for its own chat
        try:
            applied = session is not None and await self._services.chat.decide(
                ToolDecision(chat.tenant_id, turn_id, call_ref, approved, session_id=session)
            )
        except TallyError as exc:  # the process running the turn cannot be reached now
            return f"Your answer could not be passed on ({exc.code}); press again."
        if not applied:
            return "That call is no longer waiting for a decision."
        return "Approved: it runs now." if approved else "Denied: it will not run."

    async def _forget_numbered(self, argument: str, chat: ChatRef) -> CommandReply:
        """`/forget <n>`: the n-th entry `/forget` lists, for platforms without buttons."""
        entries = await self._recent(chat, limit=FORGET_CHOICES)
        if not argument.isdigit() or not 1 <= int(argument) <= len(entries):
            return CommandReply("Send /forget to see what I remember, then /forget <number>.")
        entry = entries[int(argument) - 1]
        said = await self._delete(entry.id, chat)
        return CommandReply(f"{said} ({_short(entry.content)})" if said == FORGOTTEN else said)

    async def _delete(self, entry_id: str, chat: ChatRef) -> str:
        scope = await self._services.memory_scope(chat.tenant_id, chat.user_key)
        try:
            await self._services.memory.delete(
                tenant_id=chat.tenant_id, scope_key=scope, entry_id=entry_id
            )
        except MemoryEntryNotFound:
            return "That is no longer in memory."
        return FORGOTTEN

    async def _link(self, command: Command, chat: ChatRef) -> str:
        """`/link` asks for a code, `/link CODE` links with the account that asked for it,
        `/unlink` leaves: only a private chat is one person's."""
        if chat.user_key is None:
            return "Linking works in a private chat with me."
        linking, tenant_id, user_key = self._services.linking, chat.tenant_id, chat.user_key
        try:
            if command.name == "unlink":
                await linking.unlink(tenant_id=tenant_id, user_key=user_key)
                return UNLINKED
            if not command.argument:
                issued = await linking.code_for(tenant_id=tenant_id, user_key=user_key)
                return LINK_CODE.format(code=issued.code)
            linked = await linking.link(
                tenant_id=tenant_id,
                user_key=user_key,
                code=command.argument,
                tried_by=[f"chat:{chat.channel}:{chat.external_key}"],
            )
        except MemoryNotPersonal:
            return "I keep one memory for everyone here, so there is nothing to link."
        except NotLinked:
            return "This chat is not linked to another account."
        except TallyError as exc:  # a code unknown, used, expired or asked for here
            return f"That did not work: {exc.message}."
        others = len(linked.identities) - 1
        return LINKED.format(others=others, s="" if others == 1 else "s")

    async def _help(self, chat: ChatRef) -> CommandReply:
        runtime = await self._services.runtimes.get(chat.tenant_id)
        return CommandReply(HELP.format(persona=runtime.settings.persona.name))

    async def _new(self, chat: ChatRef) -> CommandReply:
        left = await self._services.sessions.find(
            tenant_id=chat.tenant_id, channel=chat.channel, external_key=chat.external_key
        )
        if left is not None:  # what it said since memory last took it in reaches memory now
            runtime = await self._services.runtimes.get(chat.tenant_id)
            runtime.overflow.distill_tail(left)
        await self._services.sessions.detach(
            tenant_id=chat.tenant_id, channel=chat.channel, external_key=chat.external_key
        )
        return CommandReply("Started a new conversation. The old one is kept.")

    async def _stop(self, chat: ChatRef) -> CommandReply:
        session = await self._session(chat)
        if session is None or not await self._services.chat.cancel(
            tenant_id=chat.tenant_id, session_id=session
        ):
            return CommandReply("Nothing is being written right now.")
        return CommandReply("Stopped.")

    async def _summary(self, chat: ChatRef) -> CommandReply:
        found = await self._services.sessions.find(
            tenant_id=chat.tenant_id, channel=chat.channel, external_key=chat.external_key
        )
        if found is None or not found.summary.strip():
            return CommandReply("No summary yet: it is written once older turns leave my window.")
        return CommandReply("What this conversation is about so far:\n\n" + found.summary)

    async def _memory(self, chat: ChatRef) -> CommandReply:
        entries = await self._recent(chat, limit=20)
        waiting = []
        if chat.user_key is not None:
            waiting = await self._services.proposals.pending(
                tenant_id=chat.tenant_id, user_key=chat.user_key
            )
        parts = []
        if entries:
            lines = [f"• {entry.content} ({entry.date.isoformat()})" for entry in entries]
            parts.append("What I remember:\n\n" + "\n".join(lines))
        if waiting:
            lines = [f"• {p.content} (/remember {p.id} or /discard {p.id})" for p in waiting]
            parts.append("Waiting for your answer:\n\n" + "\n".join(lines))
        return CommandReply("\n\n".join(parts) or "I remember nothing yet.")

    async def _forget(self, chat: ChatRef) -> CommandReply:
        entries = await self._recent(chat, limit=FORGET_CHOICES)
        if not entries:
            return CommandReply("I remember nothing yet.")
        choices = [Choice(_short(entry.content), FORGET_PREFIX + entry.id) for entry in entries]
        return CommandReply("Which one should I forget?", choices)

    async def _recent(self, chat: ChatRef, *, limit: int) -> list[MemoryEntry]:
        scope = await self._services.memory_scope(chat.tenant_id, chat.user_key)
        return await self._services.memory.recent(
            tenant_id=chat.tenant_id, scope_key=scope, limit=limit
        )

    async def _session(self, chat: ChatRef) -> str | None:
        found = await self._services.sessions.find(
            tenant_id=chat.tenant_id, channel=chat.channel, external_key=chat.external_key
        )
        return None if found is None else found.id


def _short(text: str, limit: int = 48) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def answers_a_question(data: str) -> bool:
    """Whether a press answers a question (a tool call's approval, a line to remember): the
    answer is then shown under the question, so what was decided stays in the chat."""
    return data.startswith((APPROVE_PREFIX, DENY_PREFIX, REMEMBER_PREFIX, DISCARD_PREFIX))


def remember_question(proposal: Proposal, *, has_buttons: bool) -> CommandReply:
    """What a chat shows for a line proposed to remember about its person: Remember and
    Discard buttons, or where a platform has none, the commands that answer."""
    hours = max(1, round((proposal.expires_at - proposal.created_at).total_seconds() / 3600))
    lines = [
        "Should I remember this about you?",
        f"“{proposal.content}”",
        f"Unanswered, it is dropped in {hours} h.",
    ]
    if not has_buttons:
        lines.append(f"Send /remember {proposal.id} to keep it, or /discard {proposal.id}.")
    return CommandReply(
        "\n".join(lines),
        [
            Choice("Remember", REMEMBER_PREFIX + proposal.id),
            Choice("Discard", DISCARD_PREFIX + proposal.id),
        ],
    )


def approval_question(turn_id: str, asked: ToolApprovalRequested) -> CommandReply:
    """What a chat shows for a tool call that waits for approval, with Approve and Deny: every
    argument by name, each shortened on its own (and saying so), so that a long one cannot
    push another out of sight."""
    lines = [f"I would like to run {asked.tool_name}"]
    for name, value in asked.arguments.items():
        shown = json.dumps(value, ensure_ascii=False)
        cut = len(shown) - ARGUMENT_SHOWN
        lines.append(f"• {name}: {shown[:ARGUMENT_SHOWN]}" + (f"… ({cut} more)" if cut > 0 else ""))
    minutes = max(1, round(asked.timeout_s / 60))
    lines.append(f"Allow it? Without an answer it is denied in {minutes} min.")
    text = "\n".join(lines)
    ref = f"{turn_id}:{approval_ref(asked.tool_call_id)}"
    return CommandReply(
        text, [Choice("Approve", APPROVE_PREFIX + ref), Choice("Deny", DENY_PREFIX + ref)]
    )
