"""Which leftovers of a session are worth a summarizer call, read without a model."""

from __future__ import annotations

import pytest

from backend.chat.leftovers import holds_something_to_keep, is_short_leftover
from backend.domain.messages import Role, StoredMessage
from tests.chat.test_summarizer import message


def turns(*pairs: tuple[str, str]) -> list[StoredMessage]:
    said: list[tuple[Role, str]] = []
    for user, assistant in pairs:
        said += [("user", user), ("assistant", assistant)]
    return [message(n, role, text) for n, (role, text) in enumerate(said, 1)]


@pytest.mark.parametrize(
    "user",
    [
        "It rained the whole afternoon again.",
        "Good morning! The coffee machine is finally fixed.",
        "I tried a new yoga video this evening.",
        "The train was twenty minutes late this morning.",
        "今晚试了一个新的瑜伽视频。",
        "超市的燕麦奶卖完了。",
    ],
)
def test_small_talk_holds_nothing_to_keep(user: str) -> None:
    assert not holds_something_to_keep(turns((user, "Noted.")))


@pytest.mark.parametrize(
    "user",
    [
        "my phone number is now 555 0100",  # a correction is said of "my …"
        "I'm allergic to peanuts.",
        "Please remember that the gate code changed.",
        "The dentist moved the appointment to 3 days later.",  # a number with a unit
        "Our dinner is booked at Casa Amália.",  # a name
        "write to ines@example.com tomorrow",
        "我的手机号改成了13800138000。",
        "我住在杭州。",
    ],
)
def test_what_memory_must_not_miss_is_kept(user: str) -> None:
    assert holds_something_to_keep(turns((user, "Noted.")))


def test_an_identifier_in_the_answer_is_kept() -> None:
    booked = turns(("thanks, book it", "Booked: your reference is #48213."))
    assert holds_something_to_keep(booked)
    assert not holds_something_to_keep(turns(("thanks, book it", "Done, enjoy the trip!")))


def test_a_leftover_is_short_only_after_an_earlier_write_and_for_two_turns() -> None:
    two = turns(("a", "b"), ("c", "d"))
    three = turns(("a", "b"), ("c", "d"), ("e", "f"))
    assert is_short_leftover(two, watermark=40)
    assert not is_short_leftover(two, watermark=0)  # never distilled: always the model
    assert not is_short_leftover(three, watermark=40)
    assert not is_short_leftover([], watermark=40)
