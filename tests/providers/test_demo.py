"""The demo provider: says plainly no model answers, quotes the user, recalls its memory."""

from __future__ import annotations

from backend.domain.events import Finished, TextDelta
from backend.domain.requests import ChatRequest, RequestMessage
from backend.providers.demo import DemoProvider

SYSTEM = """# Long-term memory

2026-11-30|auto-overflow@s1:1-6|The user said: “My name is Ada.”; The user mentioned ada@example.com
2026-12-01|manual|Ada keeps bees in Lisbon.
"""


async def reply_to(text: str, *, system: str = "", key_env: str | None = None) -> str:
    request = ChatRequest(model="m", system=system, messages=(RequestMessage("user", text),))
    events = [event async for event in DemoProvider(key_env=key_env).stream(request)]
    assert isinstance(events[-1], Finished)
    return "".join(event.text for event in events if isinstance(event, TextDelta))


async def test_it_says_no_model_answers_quotes_the_user_and_names_the_variable() -> None:
    reply = await reply_to("What is the capital of Peru?", key_env="MY_VENDOR_KEY")
    assert "built-in demo provider" in reply and "no LLM API key is configured" in reply
    assert "What is the capital of Peru?" in reply
    assert "set MY_VENDOR_KEY" in reply
    assert "Nothing has left the window yet" in reply


async def test_a_long_message_is_quoted_short() -> None:
    long_text = "word " * 100
    reply = await reply_to(long_text)
    assert "word word" in reply and long_text.strip() not in reply


async def test_asked_what_it_remembers_it_recalls_every_memory_line_of_its_prompt() -> None:
    reply = await reply_to("What do you remember about me?", system=SYSTEM)
    assert "From memory I recall" in reply
    assert "My name is Ada." in reply and "Ada keeps bees in Lisbon." in reply


async def test_otherwise_it_recalls_the_lines_sharing_a_word_with_the_message() -> None:
    reply = await reply_to("Any news from Lisbon?", system=SYSTEM)
    assert "Ada keeps bees in Lisbon." in reply and "ada@example.com" not in reply
    unrelated = await reply_to("Tell me a joke", system=SYSTEM)
    assert "I remember 2 fact(s)" in unrelated
