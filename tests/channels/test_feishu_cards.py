"""The questions a Feishu bot asks with buttons on an interactive card: a tool call waiting for
approval (the turn goes on when Approve is pressed), and a line to remember about Ada
(Remember / Discard); only the person a card was shown for can answer it."""

from __future__ import annotations

from pathlib import Path

from backend.domain.messages import ToolCall
from backend.providers.scripted import ScriptedProvider, ScriptedToolCalls
from tests.channels.feishu_fixtures import serving_feishu
from tests.fakes.feishu_server import FakeFeishuServer, Sent
from tests.prompt_text import prompt_text

WRITE = {"path": "note.txt", "content": "from the chat"}
TOOLS = {
    "enabled": ["now"],
    "workspace": {"enabled": True},
    "approval": {"required": ["write_file"], "timeout_s": 600},
}


def button(card: Sent, label: str) -> dict[str, object]:
    (found,) = [b for b in card.buttons if b["text"]["content"] == label]
    return found


async def test_a_tool_call_waits_for_approve_on_a_card_and_then_runs(
    feishu: FakeFeishuServer, tmp_path: Path, database_url: str
) -> None:
    provider = ScriptedProvider()
    provider.push(ScriptedToolCalls([ToolCall("call_1", "write_file", dict(WRITE))]), "Saved.")
    async with serving_feishu(
        feishu, tmp_path, database_url, provider=provider, tools=TOOLS
    ) as served:
        await served.push(served.message("save a note"))
        (question,) = await served.sent(1)
        approve = button(question, "Approve")
        eve = served.press(approve, message_id="om_question", operator="ou_eve")
        told = await served.acked(await served.push(eve))
        await served.push(served.press(approve, message_id="om_question"))
        sent = await served.sent(3)
        stored = await served.stored()
    note = tmp_path / "data" / "workspaces" / "default" / "note.txt"
    assert question.msg_type == "interactive" and "write_file" in question.text
    assert "data" in told  # eve's press answered with a toast, nothing kept
    assert {s.text for s in sent[1:]} == {"Approved: it runs now.", "Saved."}
    assert note.read_text() == WRITE["content"]
    assert stored[-1] == ("assistant", "Saved.")


async def test_a_line_to_remember_is_asked_on_a_card_and_only_a_remembered_one_is_kept(
    feishu: FakeFeishuServer, tmp_path: Path, database_url: str
) -> None:
    provider = ScriptedProvider(replies=["ok"])
    for fact, reply in (("Ada keeps bees", "Shall I keep that?"), ("Ada hates figs", "And that?")):
        call = ToolCall(id="w", name="memory_write", arguments={"fact": fact})
        provider.push(ScriptedToolCalls([call]), reply)
    memory = {"path": str(tmp_path / "MEMORY.md"), "scope": "user", "confirm_writes": True}
    async with serving_feishu(
        feishu, tmp_path, database_url, provider=provider, memory=memory
    ) as served:
        await served.push(served.message("I keep bees"))
        bees = (await served.sent(2))[-1]
        await served.push(served.message("I hate figs"))
        figs = (await served.sent(4))[-1]
        for card, label, card_id in ((bees, "Remember", "om_bees"), (figs, "Discard", "om_figs")):
            await served.push(served.press(button(card, label), message_id=card_id))
            await served.sent(1, reply_to=card_id)
        await served.push(served.message("do I keep bees?"))
        await served.sent(7)  # after the two questions, their replies and the two answers
        after = prompt_text(provider.requests[-1])
        await served.push(served.message("/memory"))
        listed = (await served.sent(8))[-1].text
    assert bees.msg_type == "interactive" and "Ada keeps bees" in bees.text
    assert "/remember" not in bees.text  # a platform with buttons is not told the commands
    assert [s.text for s in feishu.sent("om_bees")] == ["Remembered."]
    assert "Discarded" in feishu.sent("om_figs")[0].text
    assert "Ada keeps bees" in after and "figs" not in after
    assert "Ada keeps bees" in listed and "figs" not in listed
