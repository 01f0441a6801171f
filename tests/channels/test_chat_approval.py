"""A tool call waiting for approval in a chat: Telegram asks with Approve and Deny buttons and
the turn goes on when one is pressed; on DingTalk, which has no buttons that call back, the call
is denied at once (the model is told, and says so) instead of leaving the chat waiting.

The tool under approval is the workspace's `write_file`, whose effect is a file on disk.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from backend.domain.messages import ToolCall
from backend.providers.scripted import ScriptedProvider, ScriptedToolCalls
from tests.channels.conftest import TOKEN, bot_settings, serving_bot, serving_robot
from tests.fakes.dingtalk_server import FakeDingTalkServer
from tests.fakes.telegram_server import FakeTelegramServer, Sent

WRITE = {"path": "note.txt", "content": "from the chat"}
TOOLS = {
    "enabled": ["now"],
    "workspace": {"enabled": True},
    "approval": {"required": ["write_file"], "timeout_s": 600},
}


def writing_provider(reply: str) -> ScriptedProvider:
    provider = ScriptedProvider()
    provider.push(ScriptedToolCalls([ToolCall("call_1", "write_file", dict(WRITE))]), reply)
    return provider


def note(tmp_path: Path) -> Path:
    return tmp_path / "data" / "workspaces" / "default" / "note.txt"


def buttons(message: Sent) -> list[tuple[str, str]]:
    markup = message.params["reply_markup"]
    parsed: dict[str, Any] = json.loads(markup) if isinstance(markup, str) else markup
    return [(row[0]["text"], row[0]["callback_data"]) for row in parsed["inline_keyboard"]]


async def press_and_finish(
    telegram: FakeTelegramServer, tmp_path: Path, database_url: str, label: str, reply: str
) -> tuple[Sent, list[Sent], list[tuple[str, str]]]:
    """A turn whose write_file waits; `label` pressed on the question. (The question, what
    the bot sent after, what the session stored.)"""
    provider = writing_provider(reply)
    async with serving_bot(
        telegram, tmp_path, database_url, provider=provider, tools=TOOLS
    ) as served:
        telegram.push_update(TOKEN, telegram.user_message("save a note"))
        (question,) = await served.sent(1)
        data = dict(buttons(question))[label]
        telegram.push_update(TOKEN, telegram.button_press(question, data))
        sent = await served.sent(2)
        await served.until(lambda t: bool(t.sent(0, "answerCallbackQuery")), "the button answer")
        stored = await served.stored()
    return question, sent, stored


async def test_telegram_asks_with_buttons_and_an_approved_call_runs(
    telegram: FakeTelegramServer, tmp_path: Path, database_url: str
) -> None:
    question, sent, stored = await press_and_finish(
        telegram, tmp_path, database_url, "Approve", "Saved your note."
    )
    assert "write_file" in question.text and "from the chat" in question.text
    assert [label for label, _ in buttons(question)] == ["Approve", "Deny"]
    assert all(len(data.encode()) <= 64 for _, data in buttons(question))  # Telegram's limit
    assert sent[-1].text == "Saved your note."
    assert note(tmp_path).read_text() == "from the chat"
    assert stored == [("user", "save a note"), ("assistant", "Saved your note.")]
    (edited,) = telegram.sent(42, "editMessageText")  # the question stays, with the answer
    assert edited.text == f"{question.text}\n\nApproved: it runs now."


async def test_telegram_deny_means_the_call_never_runs(
    telegram: FakeTelegramServer, tmp_path: Path, database_url: str
) -> None:
    _, sent, stored = await press_and_finish(
        telegram, tmp_path, database_url, "Deny", "I did not save it."
    )
    assert sent[-1].text == "I did not save it."
    assert not note(tmp_path).exists()
    assert stored[-1] == ("assistant", "I did not save it.")


async def test_a_button_pressed_twice_is_told_the_call_no_longer_waits(
    telegram: FakeTelegramServer, tmp_path: Path, database_url: str
) -> None:
    provider = writing_provider("Saved.")
    async with serving_bot(
        telegram, tmp_path, database_url, provider=provider, tools=TOOLS
    ) as served:
        telegram.push_update(TOKEN, telegram.user_message("save a note"))
        (question,) = await served.sent(1)
        approve = dict(buttons(question))["Approve"]
        telegram.push_update(TOKEN, telegram.button_press(question, approve))
        await served.sent(2)
        telegram.push_update(TOKEN, telegram.button_press(question, approve))
        await served.until(lambda t: len(t.sent(0, "answerCallbackQuery")) == 2, "two answers")
    edits = [s.text.rsplit("\n\n", 1)[-1] for s in telegram.sent(42, "editMessageText")]
    assert edits == ["Approved: it runs now.", "That call is no longer waiting for a decision."]


async def test_only_this_chat_and_its_allowed_people_can_answer(
    telegram: FakeTelegramServer, tmp_path: Path, database_url: str
) -> None:
    """A button's data could be forged by a modified client: a press from a person the bot
    ignores, or from another chat, decides nothing."""
    provider = writing_provider("Saved.")
    bot = bot_settings(telegram, allow_from=["ada"])
    async with serving_bot(
        telegram, tmp_path, database_url, provider=provider, tools=TOOLS, bot=bot
    ) as served:
        telegram.push_update(TOKEN, telegram.user_message("save a note"))
        (question,) = await served.sent(1)
        approve = dict(buttons(question))["Approve"]
        stranger = telegram.button_press(question, approve, user_id=99, username="mallory")
        telegram.push_update(TOKEN, stranger)
        elsewhere = telegram.button_press(question, approve, chat_id=7)
        telegram.push_update(TOKEN, elsewhere)
        await served.until(lambda t: len(t.sent(0, "answerCallbackQuery")) == 2, "two answers")
        assert not note(tmp_path).exists()  # still waiting
        telegram.push_update(TOKEN, telegram.button_press(question, approve))
        sent = await served.sent(2)
    answers = [s.params.get("text") for s in telegram.sent(0, "answerCallbackQuery")]
    assert "This bot does not take your answers." in answers
    assert "That call is no longer waiting for a decision." in answers
    assert sent[-1].text == "Saved." and note(tmp_path).read_text() == "from the chat"


async def test_dingtalk_cannot_ask_so_the_call_is_denied_at_once(
    dingtalk: FakeDingTalkServer, tmp_path: Path, database_url: str
) -> None:
    provider = writing_provider("I could not save it: it needs approval.")
    async with serving_robot(
        dingtalk, tmp_path, database_url, provider=provider, tools=TOOLS
    ) as served:
        await served.push(served.message("save a note"))
        (said,) = await served.sent(1)
        stored = await served.stored()
    assert said.text == "I could not save it: it needs approval."
    assert not note(tmp_path).exists()
    told = [m.content for m in provider.requests[-1].messages if m.role == "tool"]
    assert told == [
        "error: this call needs a person's approval, which cannot be given where this "
        "conversation happens; it did not run"
    ]
    assert stored[-1] == ("assistant", "I could not save it: it needs approval.")
