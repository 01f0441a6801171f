"""A model's reasoning as its vendor returned it, kept to be sent back within a tool loop."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ThinkingBlock:
    """One block of a step's reasoning, exactly as received: a vendor that checks it (Anthropic)
    rejects a block whose text no longer matches its `signature`. A redacted block has no text,
    only its opaque `redacted_data`."""

    text: str
    signature: str = ""
    redacted_data: str = ""

    @property
    def is_redacted(self) -> bool:
        return bool(self.redacted_data)
