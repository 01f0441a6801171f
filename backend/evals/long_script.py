"""The long memory eval's conversation: the stories told over sessions spanning months, with
small talk between them, each story's statements sessions apart. Drawn from a fixed seed, so
two runs say the same things on the same days."""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date, timedelta

from backend.evals.long_stories import (
    CHINESE,
    CHINESE_FILLERS,
    ENGLISH,
    ENGLISH_FILLERS,
    Story,
)

SEED = 20261204
SESSIONS = 24
FIRST_DAY = date(2026, 1, 5)
DAYS_BETWEEN = (6, 12)  # a session every week or two: the script spans about seven months
MESSAGES_PER_SESSION = (10, 16)  # user messages, small talk included
ASKED_AFTER = timedelta(days=3)  # the questions come a few days after the last session


@dataclass(frozen=True, slots=True)
class Session:
    day: date
    said: tuple[str, ...]  # the user's messages, in order


@dataclass(frozen=True, slots=True)
class LongScript:
    language: str
    sessions: tuple[Session, ...]
    stories: tuple[Story, ...]
    told_in: tuple[tuple[int, ...], ...]  # per story: the session of each statement

    @property
    def asked_on(self) -> date:
        return self.sessions[-1].day + ASKED_AFTER

    def said_on(self, story: int, statement: int) -> date:
        return self.sessions[self.told_in[story][statement]].day


def build_long_script(language: str, *, seed: int = SEED) -> LongScript:
    stories, fillers = (
        (CHINESE, CHINESE_FILLERS) if language == "zh" else (ENGLISH, ENGLISH_FILLERS)
    )
    rng = random.Random(seed)
    told_in = tuple(_sessions_for(story, rng) for story in stories)
    said: list[list[str]] = [[] for _ in range(SESSIONS)]
    for story, places in zip(stories, told_in, strict=True):
        for statement, place in zip(story.said, places, strict=True):
            said[place].append(statement)
    small_talk = _endless(fillers, rng)
    days = _days(rng)
    sessions = []
    for day, statements in zip(days, said, strict=True):
        messages = list(statements)
        for _ in range(max(0, rng.randint(*MESSAGES_PER_SESSION) - len(messages))):
            messages.insert(rng.randint(0, len(messages)), next(small_talk))
        sessions.append(Session(day, tuple(messages)))
    return LongScript(language, tuple(sessions), stories, told_in)


def _sessions_for(story: Story, rng: random.Random) -> tuple[int, ...]:
    """A session for each statement: a later statement at least three sessions later."""
    if len(story.said) == 1:
        return (rng.randint(0, SESSIONS - 3),)
    first = rng.randint(0, SESSIONS // 2)
    return first, rng.randint(first + 3, SESSIONS - 2)


def _days(rng: random.Random) -> list[date]:
    days = [FIRST_DAY]
    for _ in range(SESSIONS - 1):
        days.append(days[-1] + timedelta(days=rng.randint(*DAYS_BETWEEN)))
    return days


def _endless(fillers: tuple[str, ...], rng: random.Random) -> Iterator[str]:
    while True:
        shuffled = list(fillers)
        rng.shuffle(shuffled)
        yield from shuffled
