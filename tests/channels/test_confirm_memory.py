"""Confirm before remember in the bots: a line the model would remember about Ada is asked
after the reply, with Remember and Discard buttons on Telegram and with `/remember N` or
`/discard N` on DingTalk; only Ada answers it, once, and only an approved line reaches a
prompt. The real python-telegram-bot and dingtalk-stream against the fake platforms."""

from __future__ import annotations

import json
from pathlib import Path

from backend.domain.messages import ToolCall
from backend.providers.scripted import ScriptedProvider, ScriptedToolCalls
from tests.channels.conftest import TOKEN
from tests.channels.test_linked_identities import (
    ADA_TELEGRAM,
    on_dingtalk,
    on_telegram,
    serving_both,
)
from tests.fakes.dingtalk_server import FakeDingTalkServer
from tests.fakes.telegram_server import FakeTelegramServer, Sent
from tests.prompt_text import prompt_text

CONFIRMING = {"confirm_writes": True}


def remember(fact: str) -> ScriptedToolCalls:
    return ScriptedToolCalls([ToolCall(id="w", name="memory_write", arguments={"fact": fact})])


def buttons(message: Sent) -> dict[str, str]:
    markup = message.params["reply_markup"]
    parsed = json.loads(markup) if isinstance(markup, str) else markup
    return {row[0]["text"]: row[0]["callback_data"] for row in parsed["inline_keyboard"]}


async def test_telegram_asks_with_buttons_and_only_a_remembered_line_reaches_the_prompt(
    telegram: FakeTelegramServer, dingtalk: FakeDingTalkServer, tmp_path: Path, database_url: str
) -> None:
    provider = ScriptedProvider(replies=["ok"])
    provider.push(remember("Ada keeps bees"), "Shall I keep that?")
    provider.push(remember("Ada hates figs"), "And that?")
    async with serving_both(
        telegram, dingtalk, tmp_path, database_url, provider, memory=CONFIRMING
    ) as (tg, _):
        await on_telegram(tg, "I keep bees")
        bees = (await tg.sent(2, chat_id=ADA_TELEGRAM))[-1]
        await on_telegram(tg, "I hate figs")
        figs = (await tg.sent(4, chat_id=ADA_TELEGRAM))[-1]
        await on_telegram(tg, "anything on file?")
        before = prompt_text(provider.requests[-1])

        for question, choice in ((bees, "Remember"), (figs, "Discard")):
            press = telegram.button_press(
                question, buttons(question)[choice], chat_id=ADA_TELEGRAM, user_id=ADA_TELEGRAM
            )
            telegram.push_update(TOKEN, press)
        await tg.until(lambda t: len(t.sent(0, "answerCallbackQuery")) >= 2, "both answers")
        await tg.until(lambda t: len(t.sent(ADA_TELEGRAM, "editMessageText")) >= 2, "edits")
        edited = [s.text for s in telegram.sent(ADA_TELEGRAM, "editMessageText")]
        again = telegram.button_press(
            bees, buttons(bees)["Discard"], chat_id=ADA_TELEGRAM, user_id=ADA_TELEGRAM
        )
        telegram.push_update(TOKEN, again)
        await tg.until(lambda t: len(t.sent(0, "answerCallbackQuery")) >= 3, "the third answer")
        await on_telegram(tg, "anything now?")
        after = prompt_text(provider.requests[-1])
        listed = await on_telegram(tg, "/memory")

    assert "Should I remember this about you?" in bees.text and "Ada keeps bees" in bees.text
    assert set(buttons(bees)) == {"Remember", "Discard"}
    assert "/remember" not in bees.text  # a platform with buttons is not told the commands
    assert "bees" not in before and "figs" not in before
    assert any("Ada keeps bees" in text and "Remembered." in text for text in edited)
    assert any("Ada hates figs" in text and "Discarded" in text for text in edited)
    assert "Ada keeps bees" in after and "figs" not in after
    assert "Ada keeps bees" in listed and "figs" not in listed


async def test_dingtalk_asks_for_a_command_and_only_the_person_it_is_about_answers(
    telegram: FakeTelegramServer, dingtalk: FakeDingTalkServer, tmp_path: Path, database_url: str
) -> None:
    provider = ScriptedProvider(replies=["ok"])
    provider.push(remember("Ada works nights"), "Shall I keep that?")
    async with serving_both(
        telegram, dingtalk, tmp_path, database_url, provider, memory=CONFIRMING
    ) as (_, dt):
        await on_dingtalk(dt, "I work nights")
        question = (await dt.sent(2))[-1].text
        proposal_id = question.split("/remember ")[1].split(" ")[0]
        waiting = await on_dingtalk(dt, "/memory")
        by_bob = await on_dingtalk(dt, f"/remember {proposal_id}", staff="staff-bob")
        kept = await on_dingtalk(dt, f"/remember {proposal_id}")
        twice = await on_dingtalk(dt, f"/discard {proposal_id}")
        await on_dingtalk(dt, "and now?")
        after = prompt_text(provider.requests[-1])
        await on_dingtalk(dt, "and me?", staff="staff-bob")
        bobs = prompt_text(provider.requests[-1])

    assert "Should I remember this about you?" in question and "Ada works nights" in question
    assert "Waiting for your answer" in waiting and "Ada works nights" in waiting
    assert "not waiting for your answer" in by_bob
    assert kept == "Remembered." and "answered already" in twice
    assert "Ada works nights" in after and "nights" not in bobs
