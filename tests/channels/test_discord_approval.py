"""Questions a Discord chat answers with buttons: a tool call waiting for approval (Approve,
Deny) and a line the model would remember (Remember, Discard). Only the person asked may press;
a press is answered through Discord's interaction callback, the question edited to say what
became of it."""

from __future__ import annotations

import asyncio
from pathlib import Path

from backend.domain.messages import ToolCall
from backend.providers.scripted import ScriptedProvider, ScriptedToolCalls
from tests.channels.discord_fixtures import ServedDiscord, serving_discord
from tests.fakes.discord_server import Callback, FakeDiscordServer, Sent
from tests.prompt_text import prompt_text

WRITE = {"path": "note.txt", "content": "from discord"}
TOOLS = {
    "enabled": ["now"],
    "workspace": {"enabled": True},
    "approval": {"required": ["write_file"], "timeout_s": 600},
}


def buttons(message: Sent) -> dict[str, str]:
    return {
        button["label"]: button["custom_id"]
        for row in message.components
        for button in row["components"]
    }


async def press(
    served: ServedDiscord, question: Sent, custom_id: str, count: int, **who: str
) -> Callback:
    data = served.fake.press(custom_id, message_text=question.content, **who)
    await served.deliver(data, "INTERACTION_CREATE")
    await asyncio.to_thread(
        served.fake.wait_until,
        lambda: len(served.fake.callbacks()) >= count,
        what=f"{count} interaction callbacks",
    )
    return served.fake.callbacks()[-1]


async def test_a_tool_call_is_approved_with_a_button_only_its_person_may_press(
    discord_fake: FakeDiscordServer, tmp_path: Path, database_url: str
) -> None:
    provider = ScriptedProvider()
    provider.push(ScriptedToolCalls([ToolCall("call_1", "write_file", dict(WRITE))]), "Saved.")
    note = tmp_path / "data" / "workspaces" / "default" / "note.txt"
    async with serving_discord(
        discord_fake, tmp_path, database_url, provider=provider, tools=TOOLS
    ) as served:
        await served.deliver(served.message("save a note"))
        (question,) = await served.sent(1)
        approve = buttons(question)["Approve"]
        stranger = await press(served, question, approve, 1, user_id="999")
        assert not note.exists()  # still waiting
        approved = await press(served, question, approve, 2)
        sent = await served.sent(2)
    assert set(buttons(question)) == {"Approve", "Deny"}
    assert stranger.type == 4 and stranger.data["flags"] == 64
    assert approved.type == 7 and "Approved" in approved.data["content"]
    assert sent[-1].content == "Saved." and note.read_text() == "from discord"


async def test_a_remembered_line_is_asked_and_only_a_remembered_one_reaches_the_prompt(
    discord_fake: FakeDiscordServer, tmp_path: Path, database_url: str
) -> None:
    def remember(fact: str) -> ScriptedToolCalls:
        return ScriptedToolCalls([ToolCall(id="w", name="memory_write", arguments={"fact": fact})])

    provider = ScriptedProvider(replies=["ok"])
    provider.push(remember("Ada keeps bees"), "Shall I keep that?")
    provider.push(remember("Ada hates figs"), "And that?")
    memory = {"path": str(tmp_path / "MEMORY.md"), "scope": "user", "confirm_writes": True}
    async with serving_discord(
        discord_fake, tmp_path, database_url, provider=provider, memory=memory
    ) as served:
        await served.deliver(served.message("I keep bees"))
        bees = (await served.sent(2))[-1]
        await served.deliver(served.message("I hate figs"))
        figs = (await served.sent(4))[-1]
        remembered = await press(served, bees, buttons(bees)["Remember"], 1)
        discarded = await press(served, figs, buttons(figs)["Discard"], 2)
        await served.deliver(served.message("anything now?"))
        await served.sent(5)
        after = prompt_text(provider.requests[-1])
    assert "Ada keeps bees" in bees.content and set(buttons(bees)) == {"Remember", "Discard"}
    assert "Remembered." in remembered.data["content"]
    assert "Discarded" in discarded.data["content"]
    assert "Ada keeps bees" in after and "figs" not in after
