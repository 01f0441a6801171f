"""Markdown for the terminal: `tally chat` shows replies styled as they stream, never raw.

Replies arrive a few characters at a time, so the renderer is a small state machine fed text
and returning what can be printed now; the little it cannot decide yet (a `*` that may open
bold, the start of a line that may be a heading) waits for the next characters. Emphasis
(`**bold**`, `*italic*`), `` `code` ``, headings, list bullets, quotes and fenced code blocks are
drawn with ANSI styles on a terminal; elsewhere (a pipe) their marks are dropped and the text
stays plain. Styles never outlive their line, so an unclosed mark cannot colour what follows.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

# Start and end of each style; an end resets only its own attribute.
STYLES = {
    "bold": ("\x1b[1m", "\x1b[22m"),
    "italic": ("\x1b[3m", "\x1b[23m"),
    "code": ("\x1b[36m", "\x1b[39m"),
    "dim": ("\x1b[2m", "\x1b[22m"),
}
# A line start that may still turn into a block mark with more characters.
_UNDECIDED = re.compile(r" *(#{1,6}|[-*+]|>|`{1,2}|\d{1,9}[.)]?)?")
_HEADING = re.compile(r"( *)#{1,6} ")
_BULLET = re.compile(r"( *)[-*+] ")
_QUOTE = re.compile(r"( *)> ")
_FENCE = re.compile(r" *```")


@dataclass
class MarkdownStream:
    """Feed it a reply's text in pieces; print what each `feed` returns, then `finish()`."""

    is_styled: bool
    _line_start: str = ""  # the undecided start of the current line
    _is_at_line_start: bool = True
    _is_fence_line: bool = False  # the rest of a ``` line: its language name, not shown
    _is_in_fence: bool = False
    _pending_star: bool = False
    _open: list[str] = field(default_factory=list)  # inline styles open on this line
    _line_style: str | None = None  # a heading's or quote's style, closed at the line's end

    def feed(self, text: str) -> str:
        return "".join(self._char(char) for char in text)

    def finish(self) -> str:
        """What is still held back, and the end of every open style."""
        out = self._flush_line_start()
        return out + self._inline_end() + self._end_line_style()

    def _char(self, char: str) -> str:
        if self._is_fence_line:
            if char == "\n":
                self._is_fence_line = False
                self._is_in_fence = not self._is_in_fence
                self._is_at_line_start = True
            return ""
        if char == "\n":
            out = self._flush_line_start() + self._inline_end() + self._end_line_style()
            self._is_at_line_start = True
            return out + "\n"
        if self._is_at_line_start:
            self._line_start += char
            if _UNDECIDED.fullmatch(self._line_start) and not _FENCE.fullmatch(self._line_start):
                return ""
            return self._decide_line_start()
        return self._inline(char)

    def _decide_line_start(self) -> str:
        """The line start can no longer grow into a mark: draw it as what it is."""
        start, self._line_start = self._line_start, ""
        self._is_at_line_start = False
        if _FENCE.match(start):
            self._is_fence_line = True
            return ""
        if self._is_in_fence:
            return self._style("code") + start
        for pattern, replacement, style in (
            (_HEADING, "", "bold"),
            (_BULLET, "• ", None),
            (_QUOTE, "│ ", "dim"),
        ):
            found = pattern.match(start)
            if found:
                self._line_style = style
                opened = self._style(style) if style else ""
                rest = start[found.end() :]
                return found.group(1) + opened + replacement + self._inline_text(rest)
        return self._inline_text(start)

    def _flush_line_start(self) -> str:
        if not self._line_start:
            return ""
        if self._is_in_fence or not self._is_at_line_start:
            start, self._line_start = self._line_start, ""
            return start
        return self._decide_line_start()

    def _inline_text(self, text: str) -> str:
        return "".join(self._inline(char) for char in text)

    def _inline(self, char: str) -> str:
        if self._is_in_fence:
            return char
        if "code" in self._open:
            return self._toggle("code") if char == "`" else char
        out = ""
        if self._pending_star:
            self._pending_star = False
            if char == "*":
                return self._toggle("bold")
            out = self._single_star(is_followed_by_space=char.isspace())
        if char == "*":
            self._pending_star = True
            return out
        if char == "`":
            return out + self._toggle("code")
        return out + char

    def _single_star(self, *, is_followed_by_space: bool) -> str:
        """A lone `*`: closes italics, opens them before a word, else is a plain star."""
        if "italic" in self._open or not is_followed_by_space:
            return self._toggle("italic")
        return "*"

    def _toggle(self, name: str) -> str:
        if name in self._open:
            self._open.remove(name)
            return STYLES[name][1] if self.is_styled else ""
        self._open.append(name)
        return self._style(name)

    def _style(self, name: str) -> str:
        return STYLES[name][0] if self.is_styled else ""

    def _inline_end(self) -> str:
        out = ""
        if self._pending_star:
            self._pending_star = False
            out = self._single_star(is_followed_by_space=True)
        while self._open:
            out += self._toggle(self._open[-1])
        if self._is_in_fence and self.is_styled:
            out += STYLES["code"][1]
        return out

    def _end_line_style(self) -> str:
        style, self._line_style = self._line_style, None
        return STYLES[style][1] if style and self.is_styled else ""


def render_markdown(text: str, *, is_styled: bool) -> str:
    """A whole text at once (a recap of stored messages)."""
    stream = MarkdownStream(is_styled=is_styled)
    return stream.feed(text) + stream.finish()
