"""A reply as QQ messages: at most QQ's count of passive replies to one message, each within
the length sent, in order, never breaking a code fence; one that cannot fit is cut and says so."""

from __future__ import annotations

from backend.channels.qq.format import CHUNK_CHARS, CUT_NOTE, MAX_CHARS, MAX_REPLIES, qq_chunks


def words(n: int, prefix: str) -> str:
    return " ".join(f"{prefix}{k}" for k in range(n))


def test_a_short_reply_is_one_message() -> None:
    assert qq_chunks("Hello **there**.") == ["Hello **there**."]


def test_a_reply_of_a_few_chunks_is_split_at_the_usual_size() -> None:
    text = "\n\n".join(words(150, f"p{n}x") for n in range(6))
    chunks = qq_chunks(text)
    assert 1 < len(chunks) <= MAX_REPLIES and all(len(c) <= CHUNK_CHARS for c in chunks)
    assert " ".join(chunks).split() == text.split()


def test_a_reply_needing_more_replies_than_qq_allows_is_packed_into_larger_ones() -> None:
    text = "\n\n".join(words(120, f"p{n}x") for n in range(14))
    assert len(text) > MAX_REPLIES * CHUNK_CHARS
    chunks = qq_chunks(text)
    assert len(chunks) <= MAX_REPLIES and all(len(c) <= MAX_CHARS for c in chunks)
    assert " ".join(chunks).split() == text.split()


def test_a_reply_too_long_for_any_packing_is_cut_and_says_so() -> None:
    text = "\n\n".join(words(150, f"p{n}x") for n in range(40))
    chunks = qq_chunks(text)
    assert len(chunks) == MAX_REPLIES and all(len(c) <= MAX_CHARS for c in chunks)
    assert chunks[-1].endswith(CUT_NOTE)
    sent = " ".join(chunks).removesuffix(CUT_NOTE).split()
    assert sent == text.split()[: len(sent)]  # what was sent is the reply's start, in order


def test_a_code_block_is_never_split_inside_its_fence() -> None:
    code = "```python\n" + "\n".join(f"x{k} = {k}" for k in range(400)) + "\n```"
    chunks = qq_chunks("Here:\n\n" + code)
    assert all(c.count("```") % 2 == 0 for c in chunks)
