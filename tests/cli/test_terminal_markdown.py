"""The terminal's Markdown: styled on a terminal, plain in a pipe, the same however the reply
is cut into streamed pieces."""

from __future__ import annotations

import pytest

from backend.cli.terminal_markdown import MarkdownStream, render_markdown

REPLY = (
    "# Plan\n"
    "**Demo reply**: use `tally chat` and *enjoy* it.\n"
    "- first\n"
    "* second\n"
    "> quoted\n"
    "2 * 3 * 4 = 24, snake_case_name stays\n"
    "```python\n"
    "x = a * b  # **not bold**\n"
    "```\n"
    "done"
)
PLAIN = (
    "Plan\n"
    "Demo reply: use tally chat and enjoy it.\n"
    "• first\n"
    "• second\n"
    "│ quoted\n"
    "2 * 3 * 4 = 24, snake_case_name stays\n"
    "x = a * b  # **not bold**\n"
    "done"
)


def streamed(text: str, size: int, *, is_styled: bool) -> str:
    stream = MarkdownStream(is_styled=is_styled)
    pieces = [stream.feed(text[i : i + size]) for i in range(0, len(text), size)]
    return "".join(pieces) + stream.finish()


@pytest.mark.parametrize("size", [1, 2, 3, 7, len(REPLY)])
def test_marks_are_dropped_in_a_pipe_however_the_stream_is_cut(size: int) -> None:
    assert streamed(REPLY, size, is_styled=False) == PLAIN


@pytest.mark.parametrize("size", [1, 5, len(REPLY)])
def test_a_terminal_gets_styles_in_place_of_the_marks(size: int) -> None:
    shown = streamed(REPLY, size, is_styled=True)

    assert "\x1b[1mPlan\x1b[22m\n" in shown  # the heading, bold
    assert "\x1b[1mDemo reply\x1b[22m" in shown
    assert "\x1b[36mtally chat\x1b[39m" in shown and "\x1b[3menjoy\x1b[23m" in shown
    assert "\x1b[36mx = a * b  # **not bold**\x1b[39m" in shown  # code is shown as written
    assert "```" not in shown and "**" not in shown.replace("**not bold**", "")


def test_an_unclosed_mark_ends_with_its_line() -> None:
    shown = render_markdown("**never closed\nnext line", is_styled=True)

    assert shown == "\x1b[1mnever closed\x1b[22m\nnext line"


def test_a_reply_cut_midway_still_closes_its_styles() -> None:
    stream = MarkdownStream(is_styled=True)
    shown = stream.feed("see `code and *it") + stream.finish()

    assert shown.endswith("\x1b[39m") and "\x1b[36m" in shown
