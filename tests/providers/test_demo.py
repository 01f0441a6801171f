"""The demo provider: leads with what memory holds, quotes the user, and says once per session,
naming the variable and the file, that no real model answers."""

from __future__ import annotations

from backend.domain.events import Finished, TextDelta
from backend.domain.requests import ChatRequest, RequestMessage
from backend.providers.demo import DemoProvider

SYSTEM = """# Long-term memory

2026-11-30|auto-overflow@s1:1-6|The user said: “My name is Ada.”; The user mentioned ada@example.com
2026-12-01|manual|Ada keeps bees in Lisbon.
"""
HINT = "set MY_VENDOR_KEY and restart (providers.vendor.api_key_env in deploy.yaml names it)"
EARLIER = (RequestMessage("user", "hello"), RequestMessage("assistant", "hi"))


async def reply_to(text: str, *, system: str = "", is_first: bool = True) -> str:
    history = () if is_first else EARLIER
    request = ChatRequest(
        model="m", system=system, messages=(*history, RequestMessage("user", text))
    )
    events = [event async for event in DemoProvider(hint=HINT).stream(request)]
    assert isinstance(events[-1], Finished)
    return "".join(event.text for event in events if isinstance(event, TextDelta))


async def test_a_sessions_first_reply_leads_with_memory_and_ends_with_the_notice() -> None:
    reply = await reply_to("What is the capital of Peru?")

    assert reply.startswith("Nothing has left the window yet.")
    assert "You said: “What is the capital of Peru?”" in reply
    assert reply.endswith(
        "*This is Tally's built-in demo provider: no real model is answering. To talk to one, "
        f"{HINT}.*"
    )


async def test_later_replies_do_not_repeat_the_notice() -> None:
    reply = await reply_to("Any news from Lisbon?", system=SYSTEM, is_first=False)

    assert reply.startswith("From memory I recall: Ada keeps bees in Lisbon.")
    assert "demo" not in reply and "MY_VENDOR_KEY" not in reply


async def test_a_long_message_is_quoted_short() -> None:
    long_text = "word " * 100
    reply = await reply_to(long_text)
    assert "word word" in reply and long_text.strip() not in reply


async def test_asked_what_it_remembers_it_recalls_every_memory_line_of_its_prompt() -> None:
    reply = await reply_to("What do you remember about me?", system=SYSTEM)
    assert reply.startswith("From memory I recall")
    assert "My name is Ada." in reply and "Ada keeps bees in Lisbon." in reply


async def test_otherwise_it_recalls_the_lines_sharing_a_word_with_the_message() -> None:
    reply = await reply_to("Any news from Lisbon?", system=SYSTEM)
    assert "Ada keeps bees in Lisbon." in reply and "ada@example.com" not in reply
    unrelated = await reply_to("Tell me a joke", system=SYSTEM)
    assert unrelated.startswith("I remember 2 facts from earlier turns, none about this.")
