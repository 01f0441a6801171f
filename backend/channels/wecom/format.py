"""A model's Markdown reply as WeCom messages: each within WeCom's limit of 2,048 bytes of
UTF-8 (markdown and text alike), split between paragraphs and code blocks, never inside a
fence. WeCom's own Markdown is a subset (headings, bold, links, quotes, code, colored font);
the rest shows as written, so a reply is sent as it is."""

from __future__ import annotations

from backend.channels.chunking import Block, pack, pieces

MAX_BYTES = 2_048
ROBOT_MAX_BYTES = 20_000  # a robot's stream message holds 20,480 bytes


def wecom_chunks(markdown: str, *, limit: int = MAX_BYTES) -> list[str]:
    """`markdown` as ordered messages of at most `limit` UTF-8 bytes each."""

    def fits(blocks: list[Block]) -> bool:
        return len(_joined(blocks).encode("utf-8")) <= limit

    blocks = pieces(markdown, lambda block: fits([block]))
    return [_joined(group) for group in pack(blocks, fits)]


def _joined(blocks: list[Block]) -> str:
    return "\n\n".join(block.markdown() for block in blocks)
