"""Replies as Telegram messages: Telegram's HTML, escaped, split at most 4,096 characters apart,
between paragraphs and code blocks, in order, with no fence or tag broken."""

from __future__ import annotations

import re

from backend.channels.telegram.format import MAX_CHARS, telegram_chunks


def test_text_is_escaped_and_markdown_becomes_telegram_html() -> None:
    (chunk,) = telegram_chunks(
        "# Plan\n\nUse **bold**, *italic*, ~~old~~, `a<b>` and [docs](https://x.io/?a=1&b=2).\n"
        "- first & <second>\n- third"
    )
    assert chunk.html == (
        "<b>Plan</b>\n\n"
        "Use <b>bold</b>, <i>italic</i>, <s>old</s>, <code>a&lt;b&gt;</code> and "
        '<a href="https://x.io/?a=1&amp;b=2">docs</a>.\n'
        "• first &amp; &lt;second&gt;\n• third"
    )
    assert chunk.plain.startswith("# Plan\n\nUse **bold**")


def test_a_code_block_is_literal_and_keeps_its_language() -> None:
    (chunk,) = telegram_chunks("Look:\n\n```python\nif a < b and c > d:\n    print('**x**')\n```")
    assert chunk.html == (
        'Look:\n\n<pre><code class="language-python">if a &lt; b and c &gt; d:\n'
        "    print('**x**')</code></pre>"
    )


def test_a_long_reply_with_code_is_split_in_order_without_breaking_a_fence() -> None:
    paragraphs = [f"Paragraph {n}: " + "words " * 120 for n in range(12)]
    code = "\n".join(f"line_{n} = {n} * 2  # <comment>" for n in range(120))
    reply = "\n\n".join([*paragraphs[:6], f"```python\n{code}\n```", *paragraphs[6:]])
    assert len(reply) > 10_000

    chunks = telegram_chunks(reply)

    assert len(chunks) >= 3
    for chunk in chunks:
        assert len(chunk.html) <= MAX_CHARS and len(chunk.plain) <= MAX_CHARS
        assert chunk.html.count("<pre>") == chunk.html.count("</pre>")
        assert chunk.plain.count("```") % 2 == 0

    def words(text: str) -> list[str]:
        return text.replace("```python", " ").replace("```", " ").split()

    assert words(" ".join(c.plain for c in chunks)) == words(reply)
    order = [int(n) for c in chunks for n in re.findall(r"Paragraph (\d+)", c.plain)]
    assert order == list(range(12))


def test_a_code_block_longer_than_a_message_is_split_into_fenced_parts() -> None:
    code = "\n".join(f"x{n} = '{'y' * 60}'" for n in range(200))
    chunks = telegram_chunks(f"```\n{code}\n```")
    assert len(chunks) >= 3
    assert all(
        c.html.startswith("<pre><code>") and c.html.endswith("</code></pre>") for c in chunks
    )
    lines = [line for c in chunks for line in c.plain.split("\n") if line != "```"]
    assert lines == code.split("\n")


def test_a_single_line_longer_than_a_message_splits_at_spaces() -> None:
    line = " ".join(f"w{n}" for n in range(3000))
    chunks = telegram_chunks(line)
    assert all(len(c.html) <= MAX_CHARS for c in chunks)
    assert " ".join(c.plain for c in chunks).split() == line.split()
