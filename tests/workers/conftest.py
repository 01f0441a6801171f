"""What the several-process tests share: the fake model every Tally process answers with."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.fakes.openai_server import FakeOpenAIServer


@pytest.fixture
def upstream() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as server:
        yield server
