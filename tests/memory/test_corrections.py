"""The correction rules the demo summarizer and the fidelity gate share."""

from __future__ import annotations

from backend.memory.corrections import changed_things, overridden_sentences, without_overridden


def test_the_ways_a_user_says_something_changed() -> None:
    said = [
        "My phone number is now 555-0199.",
        "Correction: my sister is actually called Ana.",
        "My dentist appointment has moved to 3 May.",
        "Update: my work email is b@example.org",
        "These days my favourite colour is teal.",
        "My address changed, it's 1 Main St now.",
        "My cat is grey.",  # no change in it
    ]
    assert set(changed_things(said)) == {
        "my phone number",
        "my sister",
        "my dentist appointment",
        "my work email",
        "my favourite colour",
        "my address",
    }


def test_the_ways_a_user_says_in_chinese_that_something_changed() -> None:
    said = [
        "我的手机号改成了13912345678。",
        "更正：我的邮箱是 wang@example.cn",
        "我的牙医预约已经改成5月3日了",
        "我的猫是灰色的。",  # no change in it
    ]
    assert set(changed_things(said)) == {"我的手机号", "我的邮箱", "我的牙医预约"}
    told = ["我的手机号是13800000000。", "你好！", "我的手机号改成了13912345678。"]
    assert overridden_sentences(told) == {"我的手机号是13800000000。"}
    assert "13800000000" not in " ".join(without_overridden(told))


def test_a_sentence_taken_back_later_is_overridden_and_its_identifiers_go_with_it() -> None:
    said = [
        "My email is a@example.org, write to me.",
        "Hello!",
        "My email has changed to b@example.org",
    ]
    assert overridden_sentences(said) == {"My email is a@example.org, write to me."}
    kept = without_overridden(said)
    assert "a@example.org" not in " ".join(kept)
    assert kept[2] == "My email has changed to b@example.org"  # the rest exactly as it was
    assert without_overridden(["Write to ada@example.com please"]) == [
        "Write to ada@example.com please"
    ]


def test_an_overridden_sentence_holding_another_goes_whole() -> None:
    """ "a@b.c My phone…" reads as one sentence and holds another overridden one: removing the
    shorter first would leave the old email behind (as it did in one set order of two)."""
    said = [
        "My phone number is 555-1234.",
        "Write to me: my email is a@b.c My phone number is 555-1234.",
        "My email is now x@y.z",
        "My phone number is now 555-9999.",
    ]
    kept = " ".join(without_overridden(said))

    assert "a@b.c" not in kept and "555-1234" not in kept
    assert "x@y.z" in kept and "555-9999" in kept
