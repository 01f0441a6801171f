"""Whether a session's leftover turns are worth a summarizer call.

An automatic write distills a session once 30 messages are undistilled; when the session then
ends a turn or two later, its tail is distilled on its own, and that call most often writes
nothing ("The supermarket ran out of oat milk."). Such a short leftover of a session memory has
already taken in is read here, without a model: it is worth a call when it holds what memory
must not miss — a sentence about the user themselves or their things (which is also where
every correction is said: "my phone number is now …"), something they ask to be remembered, an
identifier the fidelity gate tracks, or a name. Otherwise it stays in the archive, which
retrieval searches (and the session's own window, if it goes on), and the session's watermark
moves past it.

The same first-person patterns are what the built-in rule-based summarizer keeps as facts.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from backend.chat.fidelity import extract_identifiers
from backend.chat.window import WindowRow
from backend.domain.messages import StoredMessage
from backend.memory.corrections import SENTENCE

SHORT_LEFTOVER = 4  # messages: two turns. A longer tail is always distilled by the model.
ABOUT_THEMSELVES = re.compile(
    r"\b(my|i am|i'm|i live|i work|i like|i love|i prefer|i have|call me|remember)\b"
    r"|我叫|我是|我住|我在|我喜欢|我的|记住",
    re.IGNORECASE,
)
# A capitalised word after a sentence's first: a name or a place ("Lisbon", "Casa Amália").
_NAME = re.compile(r"(?<=\s)[A-Z][\w'-]*")
_NOT_NAMES = frozenset({"I", "I'm", "I've", "I'd", "I'll", "OK"})


def is_short_leftover(fresh: Sequence[WindowRow], *, watermark: int) -> bool:
    """Whether `fresh` (the undistilled whole turns of a tail) is a short remainder of a
    session memory has taken in before. A session never distilled always goes to the model:
    its tail is all memory would ever learn of it."""
    return watermark > 0 and 0 < len(fresh) <= SHORT_LEFTOVER


def holds_something_to_keep(messages: Sequence[StoredMessage]) -> bool:
    """Whether the messages say anything memory must not miss (see the module docstring):
    the user's words by every rule, the assistant's by identifiers (a booking reference)."""
    said = [m.content for m in messages if m.role == "user"]
    answered = [m.content for m in messages if m.role == "assistant"]
    if extract_identifiers([*said, *answered], limit=1):
        return True
    return any(ABOUT_THEMSELVES.search(text) or _names_something(text) for text in said)


def _names_something(text: str) -> bool:
    return any(
        word.rstrip(".,;:!?") not in _NOT_NAMES
        for sentence in SENTENCE.findall(text)
        for word in _NAME.findall(sentence.strip())
    )
