"""The memory eval's script: facts told in short user messages, some corrected later, filler
turns between them, a question naming what each fact is about, and facts never told.

Everything is drawn from a fixed seed, so two runs say the same things in the same order. No
value is a word of any other text of the script (other facts, questions, fillers, the reply),
so a value found in what the model received was carried there from the turn that told it.
"""

from __future__ import annotations

import dataclasses
import math
import random
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from backend.evals.fact_pools import (
    APPOINTMENTS,
    EMAIL_DOMAINS,
    FILLERS,
    FIRST_NAMES,
    MONTHS,
    OWN_EMAILS,
    OWN_PHONES,
    PREFERENCES,
    QUANTITIES,
    RELATIONS,
    SURNAMES,
)
from backend.evals.mentions import Haystack

SEED = 20261201
KINDS = ("name", "email", "phone", "quantity", "date", "preference")
CORRECTED_SHARE = 0.15  # of the facts told, corrected in a later turn
FILLER_CHANCE = 0.6  # of a filler turn after each fact
CORRECTION_GAP = 6  # turns at least between a fact and its correction
CONTROL_SHARE = 0.05  # never told, asked all the same: none may count as recalled
MIN_CONTROLS = 3
REPLY = "Noted."  # what the recording chat model answers every turn
# Words of Tally's own texts around a fact in a request (the memory line and summary wrappers).
RESERVED = "Tally The user said The user mentioned kept verbatim not summarized yet messages"

Draw = Callable[[random.Random], str]


@dataclass(frozen=True, slots=True)
class Fact:
    """One thing the user says about themselves; `corrected_value` replaces `value` later."""

    kind: str
    subject: str  # what it is about, as the messages name it: "sister's name"
    question: str
    statement: str
    value: str
    correction: str | None = None
    corrected_value: str | None = None

    @property
    def current_value(self) -> str:
        return self.corrected_value or self.value

    @property
    def stale_value(self) -> str | None:
        """The value a correction superseded, if it was corrected."""
        return self.value if self.corrected_value is not None else None


@dataclass(frozen=True, slots=True)
class Script:
    """`messages`, in order, tell `facts`; `told_at[i]` is the index of the message that gave
    facts[i] its current value. `controls` are asked about and never told."""

    messages: tuple[str, ...]
    facts: tuple[Fact, ...]
    told_at: tuple[int, ...]
    controls: tuple[Fact, ...]

    @property
    def corrected(self) -> tuple[Fact, ...]:
        return tuple(fact for fact in self.facts if fact.stale_value is not None)


@dataclass(frozen=True, slots=True)
class _Phrasing:
    statements: tuple[str, ...]  # "{s}": the subject, "{v}": the value
    question: str
    corrections: tuple[str, ...]


PHRASINGS = {
    "name": _Phrasing(
        ("My {s} is {v}.", "Remember: my {s} is {v}."),
        "What is my {s}?",
        ("Correction: my {s} is actually {v}.", "My {s} is now {v}, I got it wrong before."),
    ),
    "email": _Phrasing(
        ("My {s} is {v}", "Note my {s}: {v}"),
        "What is my {s} address?",
        ("My {s} has changed to {v}", "Update: my {s} is now {v}"),
    ),
    "phone": _Phrasing(
        ("My {s} is {v}.", "Save my {s}: {v}."),
        "What is my {s}?",
        ("My {s} is now {v}.", "My {s} changed, it's {v} now."),
    ),
    "quantity": _Phrasing(
        ("My {s} is {v}.", "For the record, my {s} is {v}."),
        "What is my {s}?",
        ("Update: my {s} is now {v}.", "Correction, my {s} is {v}."),
    ),
    "date": _Phrasing(
        ("My {s} is on {v}.", "Remember that my {s} is on {v}."),
        "When is my {s}?",
        ("Correction: my {s} is on {v}, not what I said.", "My {s} has moved to {v}."),
    ),
    "preference": _Phrasing(
        ("My {s} is {v}.", "I'd say my {s} is {v}."),
        "What is my {s}?",
        ("I've changed my mind: my {s} is now {v}.", "These days my {s} is {v}."),
    ),
}


def _subjects() -> dict[str, list[tuple[str, Draw]]]:
    """Every subject of each kind, with how its values are drawn."""
    people = [f"{who}'s" for who in RELATIONS]
    return {
        "name": [(f"{who} name", _first_name) for who in people],
        "email": [(s, _email) for s in (*OWN_EMAILS, *(f"{who} email" for who in people))],
        "phone": [(s, _phone) for s in (*OWN_PHONES, *(f"{who} phone number" for who in people))],
        "quantity": [(p, _quantity(unit, low, high)) for p, unit, low, high in QUANTITIES],
        "date": [(s, _date) for s in (*APPOINTMENTS, *(f"{who} birthday" for who in people))],
        "preference": [(phrase, _choice(values)) for phrase, values in PREFERENCES],
    }


def _first_name(rng: random.Random) -> str:
    return rng.choice(FIRST_NAMES)


def _date(rng: random.Random) -> str:
    return f"{rng.randint(1, 28)} {rng.choice(MONTHS)}"


def _choice(values: Sequence[str]) -> Draw:
    return lambda rng: rng.choice(values)


def _quantity(unit: str, lowest: int, highest: int) -> Draw:
    return lambda rng: f"{rng.randint(lowest, highest)} {unit}"


def _email(rng: random.Random) -> str:
    local = rng.choice(SURNAMES)
    if rng.random() < 0.5:
        local = f"{rng.choice('abcdefghjklmnprstvw')}.{local}"
    if rng.random() < 0.3:
        local += str(rng.randint(2, 99))
    return f"{local}@{rng.choice(EMAIL_DOMAINS)}"


def _phone(rng: random.Random) -> str:
    def digits(count: int) -> str:
        return "".join(str(rng.randint(0, 9)) for _ in range(count))

    shapes = (
        lambda: f"+44 7{digits(3)} {digits(6)}",
        lambda: f"+49 15{digits(2)} {digits(7)}",
        lambda: f"+33 6 {digits(2)} {digits(2)} {digits(2)} {digits(2)}",
        lambda: f"+1 {rng.randint(201, 989)} {digits(3)} {digits(4)}",
        lambda: f"+31 6 {digits(8)}",
    )
    return rng.choice(shapes)()


def max_facts() -> int:
    """The most facts one script can tell (each subject once, controls aside)."""
    total = sum(len(subjects) for subjects in _subjects().values())
    return math.floor(total / (1 + CONTROL_SHARE)) - MIN_CONTROLS


def build_script(count: int, *, seed: int = SEED) -> Script:
    """`count` facts told in a conversation, some corrected later, and the controls."""
    if not 1 <= count <= max_facts():
        raise ValueError(f"between 1 and {max_facts()} facts")
    rng = random.Random(seed)
    values = _Values()
    controls_count = max(MIN_CONTROLS, round(count * CONTROL_SHARE))
    drawn = [_fact(kind, subject, draw, rng, values) for kind, subject, draw in _plan(count, seed)]
    drawn += [
        _fact(kind, subject, draw, rng, values)
        for kind, subject, draw in _plan(controls_count, seed, skip=count)
    ]
    facts, controls = drawn[:count], drawn[count:]
    rng.shuffle(facts)
    corrected = _corrected(facts, rng, values)
    return _conversation(corrected, rng, controls)


def _plan(count: int, seed: int, *, skip: int = 0) -> Iterator[tuple[str, str, Draw]]:
    """(kind, subject, draw) for `count` facts: the kinds in turn, each subject once."""
    subjects = _subjects()
    order = random.Random(seed)
    for pool in subjects.values():
        order.shuffle(pool)
    cursors = dict.fromkeys(KINDS, 0)
    planned = 0
    while planned < skip + count:
        if all(cursors[kind] >= len(subjects[kind]) for kind in KINDS):
            raise ValueError(f"only {planned} subjects to tell facts about")
        for kind in KINDS:
            if cursors[kind] < len(subjects[kind]) and planned < skip + count:
                subject, draw = subjects[kind][cursors[kind]]
                cursors[kind] += 1
                if planned >= skip:
                    yield kind, subject, draw
                planned += 1


class _Values:
    """The values drawn so far: a new one may be none of them, nor a word of any other text."""

    def __init__(self) -> None:
        self._taken: list[tuple[str, str]] = []
        self._taken_text = Haystack("")
        phrasings = [
            template.format(s=subject, v="")
            for kind, pool in _subjects().items()
            for subject, _ in pool
            for template in (
                *PHRASINGS[kind].statements,
                PHRASINGS[kind].question,
                *PHRASINGS[kind].corrections,
            )
        ]
        self._background = Haystack("\n".join([*FILLERS, REPLY, RESERVED, *phrasings]))

    def draw(self, kind: str, draw: Draw, rng: random.Random) -> str:
        for _ in range(1000):
            value = draw(rng)
            if self._is_free(kind, value):
                self._taken.append((kind, value))
                self._taken_text = Haystack("\n".join(taken for _, taken in self._taken))
                return value
        raise ValueError(f"no free {kind} value left")

    def _is_free(self, kind: str, value: str) -> bool:
        """Neither in the other texts or values, nor holding one of those values itself."""
        if self._background.has(kind, value) or self._taken_text.has(kind, value):
            return False
        candidate = Haystack(value)
        return not any(candidate.has(taken_kind, taken) for taken_kind, taken in self._taken)


def _fact(kind: str, subject: str, draw: Draw, rng: random.Random, values: _Values) -> Fact:
    phrasing = PHRASINGS[kind]
    value = values.draw(kind, draw, rng)
    return Fact(
        kind=kind,
        subject=subject,
        question=_capitalised(phrasing.question.format(s=subject)),
        statement=_capitalised(rng.choice(phrasing.statements).format(s=subject, v=value)),
        value=value,
    )


def _corrected(facts: list[Fact], rng: random.Random, values: _Values) -> list[Fact]:
    """`facts` with a share of them given a correction (a new value), at least one."""
    count = max(1, math.ceil(len(facts) * CORRECTED_SHARE))
    early = range(max(1, len(facts) - len(facts) // 5))  # time for a correction after them
    chosen = set(rng.sample(early, min(count, len(early))))
    subjects = _subjects()
    draws = {(kind, subject): draw for kind, pool in subjects.items() for subject, draw in pool}
    corrected = []
    for index, fact in enumerate(facts):
        if index in chosen:
            new = values.draw(fact.kind, draws[fact.kind, fact.subject], rng)
            template = rng.choice(PHRASINGS[fact.kind].corrections)
            correction = _capitalised(template.format(s=fact.subject, v=new))
            fact = dataclasses.replace(fact, correction=correction, corrected_value=new)
        corrected.append(fact)
    return corrected


def _conversation(facts: list[Fact], rng: random.Random, controls: list[Fact]) -> Script:
    """Each fact told in turn with filler turns between, and each correction placed at a
    later turn at least CORRECTION_GAP turns on."""
    base: list[tuple[str, int | None]] = []  # (message, the fact it tells)
    fillers = list(FILLERS)
    rng.shuffle(fillers)
    for index, fact in enumerate(facts):
        base.append((fact.statement, index))
        if rng.random() < FILLER_CHANCE:
            base.append((fillers[len(base) % len(fillers)], None))
    placed: list[tuple[float, str, int | None]] = [
        (position, text, index) for position, (text, index) in enumerate(base)
    ]
    told = {index: position for position, (_, index) in enumerate(base) if index is not None}
    for index, fact in enumerate(facts):
        if fact.correction is not None:
            earliest = min(told[index] + CORRECTION_GAP, len(base))
            position = rng.randint(earliest, len(base)) - 0.5 + rng.random() / 2
            placed.append((position, fact.correction, index))
    placed.sort(key=lambda item: item[0])
    told_at = [0] * len(facts)
    for position, (_, _, told_fact) in enumerate(placed):
        if told_fact is not None:
            told_at[told_fact] = position  # the correction comes last, so it wins
    return Script(
        messages=tuple(text for _, text, _ in placed),
        facts=tuple(facts),
        told_at=tuple(told_at),
        controls=tuple(controls),
    )


def _capitalised(text: str) -> str:
    return text[:1].upper() + text[1:]
