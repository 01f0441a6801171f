"""The memory eval's script is honest: each value is said only where the script says it, so
finding it in a request means memory carried it there; and it is the same on every run."""

from __future__ import annotations

from collections import Counter

import pytest

from backend.evals.memory_facts import KINDS, REPLY, build_script, max_facts
from backend.evals.mentions import is_mentioned

SCRIPT = build_script(200)


def test_every_value_is_said_only_in_the_message_that_tells_it() -> None:
    for index, fact in enumerate(SCRIPT.facts):
        said = [i for i, m in enumerate(SCRIPT.messages) if is_mentioned(m, fact.kind, fact.value)]
        if fact.corrected_value is None:
            assert said == [SCRIPT.told_at[index]], fact
        else:
            assert len(said) == 1 and said[0] < SCRIPT.told_at[index], fact
            corrected = [
                i
                for i, m in enumerate(SCRIPT.messages)
                if is_mentioned(m, fact.kind, fact.corrected_value)
            ]
            assert corrected == [SCRIPT.told_at[index]], fact
    questions = [fact.question for fact in (*SCRIPT.facts, *SCRIPT.controls)]
    for fact in (*SCRIPT.facts, *SCRIPT.controls):
        for value in (fact.value, fact.corrected_value):
            assert value is None or not any(
                is_mentioned(text, fact.kind, value) for text in [*questions, REPLY]
            ), fact


def test_a_fact_never_stated_is_in_no_message() -> None:
    assert len(SCRIPT.controls) == 10
    for control in SCRIPT.controls:
        assert not any(is_mentioned(m, control.kind, control.value) for m in SCRIPT.messages)
        assert control.subject not in {fact.subject for fact in SCRIPT.facts}


def test_the_script_tells_every_kind_and_corrects_more_than_a_tenth_later() -> None:
    kinds = Counter(fact.kind for fact in SCRIPT.facts)
    assert set(kinds) == set(KINDS) and min(kinds.values()) >= 30
    assert len({fact.subject for fact in SCRIPT.facts}) == 200
    assert len(SCRIPT.corrected) >= 20
    fillers = len(SCRIPT.messages) - len(SCRIPT.facts) - len(SCRIPT.corrected)
    assert fillers > 60
    assert all(len(message) <= 90 for message in SCRIPT.messages)


def test_the_script_is_the_same_on_every_run() -> None:
    assert build_script(60) == build_script(60)
    assert build_script(60).facts != build_script(60, seed=7).facts


def test_the_script_refuses_more_facts_than_it_has_subjects() -> None:
    assert build_script(max_facts()).facts
    with pytest.raises(ValueError):
        build_script(max_facts() + 1)


@pytest.mark.parametrize(
    ("kind", "value", "text", "is_found"),
    [
        ("quantity", "72 kg", "The user weighs 72kg now", True),
        ("quantity", "72 kg", "about 72 kilograms", True),
        ("quantity", "1450 EUR", "rent: €1,450 a month", True),
        ("quantity", "72 kg", "a 172 kg press", False),
        ("quantity", "72 kg", "1.72 kg of flour", False),
        ("date", "3 June", "on June 3rd", True),
        ("date", "3 June", "the 3rd of June", True),
        ("date", "3 June", "13 June", False),
        ("date", "1 March", "March 14", False),
        ("phone", "+44 7700 900123", "call +447700900123", True),
        ("phone", "+44 7700 900123", "(+44) 7700-900 123", True),
        ("phone", "+44 7700 900123", "+44 7700 900124", False),
        ("name", "Priya", "PRIYA's birthday", True),
        ("name", "Priya", "write to priya.s@example.com", False),
        ("email", "s.priya@example.com", "mail as.priya@example.com", False),
        ("email", "s.priya@example.com", "mail s.priya@example.com.", True),
        ("preference", "Vim", "they use vimdiff", False),
    ],
)
def test_a_value_is_found_however_it_is_written_but_never_inside_another(
    kind: str, value: str, text: str, is_found: bool
) -> None:
    assert is_mentioned(text, kind, value) is is_found
