"""The correction rules the demo summarizer and the fidelity gate share."""

from __future__ import annotations

from backend.chat.corrections import changed_things, overridden_sentences, without_overridden


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
        "phone number",
        "sister",
        "dentist appointment",
        "work email",
        "favourite colour",
        "address",
    }


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
