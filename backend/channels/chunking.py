"""A model's Markdown reply cut into a platform's messages: between paragraphs and around code
blocks, and only when a block alone is too long, inside it (by lines, then near a space). Each
platform says what fits (its limit, on the text as it will send it) and renders the blocks."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

_FENCE = re.compile(r"^```([\w+#.-]*)[^\n]*\n(.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)


@dataclass(frozen=True, slots=True)
class Block:
    source: str
    code_language: str | None = None  # set: a fenced code block, `source` its body

    def markdown(self) -> str:
        """The block as Markdown again: a piece of a code block keeps its fence."""
        if self.code_language is not None:
            return f"```{self.code_language}\n{self.source}\n```"
        return self.source


def pieces(markdown: str, fits: Callable[[Block], bool]) -> list[Block]:
    """`markdown`'s blocks in order, those that do not fit split until they do."""
    return [piece for block in _blocks(markdown) for piece in _fit(block, fits)]


def pack(blocks: list[Block], fits: Callable[[list[Block]], bool]) -> list[list[Block]]:
    """Consecutive blocks grouped into as few messages as `fits` allows, in order."""
    groups: list[list[Block]] = []
    current: list[Block] = []
    for block in blocks:
        if current and not fits([*current, block]):
            groups.append(current)
            current = []
        current.append(block)
    if current:
        groups.append(current)
    return groups


def markdown_chunks(markdown: str, limit: int, *, size: Callable[[str], int] = len) -> list[str]:
    """For a platform that renders Markdown itself: `markdown` as ordered messages of at most
    `limit` (measured by `size`: characters, or the bytes a platform counts), the blocks of one
    message joined by a blank line."""

    def fits(blocks: list[Block]) -> bool:
        return size(_joined(blocks)) <= limit

    blocks = pieces(markdown, lambda block: fits([block]))
    return [_joined(group) for group in pack(blocks, fits)]


def _joined(blocks: list[Block]) -> str:
    return "\n\n".join(block.markdown() for block in blocks)


def _blocks(markdown: str) -> list[Block]:
    """Fenced code blocks whole, and the paragraphs between them."""
    blocks: list[Block] = []
    position = 0
    for fence in _FENCE.finditer(markdown):
        blocks += _paragraphs(markdown[position : fence.start()])
        blocks.append(Block(fence.group(2).rstrip("\n"), code_language=fence.group(1)))
        position = fence.end()
    blocks += _paragraphs(markdown[position:])
    return blocks


def _paragraphs(text: str) -> list[Block]:
    return [Block(p.strip("\n")) for p in re.split(r"\n[ \t]*\n", text) if p.strip()]


def _fit(block: Block, fits: Callable[[Block], bool]) -> list[Block]:
    """`block`, or the blocks it splits into (by lines, then by characters) to fit."""
    if fits(block):
        return [block]
    lines = block.source.split("\n")
    if len(lines) == 1:
        half = _split_point(block.source)
        parts = [block.source[:half], block.source[half:]]
    else:
        parts = ["\n".join(lines[: len(lines) // 2]), "\n".join(lines[len(lines) // 2 :])]
    return [
        piece
        for part in parts
        if part.strip()
        for piece in _fit(Block(part, block.code_language), fits)
    ]


def _split_point(text: str) -> int:
    """The middle of `text`, moved back to a space when there is one near it."""
    middle = len(text) // 2
    space = text.rfind(" ", 0, middle)
    return space + 1 if space > middle // 2 else middle
