"""Feishu's shapes, unit by unit: Markdown as a `post` Feishu renders (headings as bold lines,
code blocks untouched), chunks within the limit, a card's buttons carrying whose they are; and
a rich-text message read for its words, mentions and pictures."""

from __future__ import annotations

import json
from typing import Any

import pytest

from backend.channels.commands import Ask, Choice, Command
from backend.channels.feishu.format import card_content, feishu_chunks, post_content
from backend.channels.feishu.inbound import FeishuMessage, parse, read_message
from backend.channels.platform_body import RefusedUpdate
from backend.settings.channels_feishu import FeishuSettings

SETTINGS = FeishuSettings(
    kind="feishu", app_id="cli_1", app_secret_env="FS_APP_SECRET", allow_from=["*"]
)


def test_markdown_becomes_one_md_element_with_headings_bold_and_code_untouched() -> None:
    markdown = "# Title\n\nSome **bold**.\n\n```python\n# not a heading\n```"
    (paragraph,) = post_content(markdown)["zh_cn"]["content"]
    assert paragraph == [
        {"tag": "md", "text": "**Title**\n\nSome **bold**.\n\n```python\n# not a heading\n```"}
    ]


def test_chunks_keep_order_and_the_limit_and_never_cut_a_fence() -> None:
    code = "```\n" + "\n".join(f"line {n}" for n in range(300)) + "\n```"
    markdown = "\n\n".join(["intro " * 300, code, "outro " * 300])
    chunks = feishu_chunks(markdown, limit=1_000)
    assert all(len(chunk) <= 1_000 for chunk in chunks)
    assert all(chunk.count("```") % 2 == 0 for chunk in chunks)

    def words(text: str) -> list[str]:  # a fence cut in two is closed and opened again
        return [word for word in text.split() if word != "```"]

    assert words(" ".join(chunks)) == words(markdown)


def test_a_cards_buttons_carry_the_choice_and_whose_they_are() -> None:
    owner = {"owner": "ou_ada", "chat": "oc_1", "private": True}
    card = card_content("Which?", [Choice("Bees", "forget:1"), Choice("Figs", "forget:2")], owner)
    (text, actions) = card["elements"]
    assert text == {"tag": "markdown", "content": "Which?"}
    assert [b["value"] for b in actions["actions"]] == [
        owner | {"data": "forget:1"},
        owner | {"data": "forget:2"},
    ]


def rich_text_event(content: object, mentions: list[Any]) -> dict[str, Any]:
    return {
        "schema": "2.0",
        "header": {"event_id": "ev1", "event_type": "im.message.receive_v1", "token": "t"},
        "event": {
            "sender": {"sender_id": {"open_id": "ou_ada", "user_id": "u_ada"}},
            "message": {
                "message_id": "om_1",
                "chat_id": "oc_group",
                "chat_type": "group",
                "message_type": "post",
                "content": json.dumps(content),
                "mentions": mentions,
            },
        },
    }


def test_a_rich_text_message_gives_its_words_mentions_and_pictures() -> None:
    content = {
        "title": "Trip",
        "content": [
            [{"tag": "at", "user_id": "@_user_1"}, {"tag": "text", "text": " look at this"}],
            [{"tag": "img", "image_key": "img_1"}, {"tag": "text", "text": "and @_user_2"}],
        ],
    }
    mentions = [
        {"key": "@_user_1", "id": {"open_id": "ou_bot"}, "name": "Tally"},
        {"key": "@_user_2", "id": {"open_id": "ou_bob"}, "name": "Bob"},
    ]
    message = parse(rich_text_event(content, mentions))
    assert isinstance(message, FeishuMessage) and message.images == ("img_1",)
    asked = read_message(message, SETTINGS, "ou_bot")
    assert asked == Ask("Trip\n look at this\nand @Bob")
    assert read_message(message, SETTINGS, "ou_someone_else") is None  # not for this bot
    slash = parse(rich_text_event({"content": [[{"tag": "text", "text": "/forget 2"}]]}, []))
    assert isinstance(slash, FeishuMessage)
    everyone = SETTINGS.model_copy(update={"group_policy": "all"})
    assert read_message(slash, everyone, "ou_bot") == Command("forget", "2")


@pytest.mark.parametrize(
    "content",
    [{"content": "not a list"}, {"content": [["not an object"]]}, {"content": [[{"tag": "img"}]]}],
)
def test_a_rich_text_message_that_does_not_read_is_refused(content: object) -> None:
    with pytest.raises(RefusedUpdate):
        parse(rich_text_event(content, []))
