"""Running `tally` in a real pseudo-terminal, as a person at a keyboard would.

The command is the session leader of a fresh pty (stdlib `pty.fork`), so the line discipline
turns a typed Ctrl-C into SIGINT for it and readline sees a terminal. Every wait is for a
condition (text on the screen, the process gone) under a generous deadline, never a sleep.
"""

from __future__ import annotations

import errno
import fcntl
import os
import pty
import re
import select
import signal
import struct
import sys
import termios
import time
from pathlib import Path
from types import TracebackType
from typing import Self

from tests.conftest import ROOT
from tests.waiting import until_blocking

DEADLINE_S = 60.0  # the machine may be busy; a passing run takes a second or two
ESCAPES = re.compile(rb"\x1b\[[0-9;?]*[A-Za-z]|\x1b[=>]|\r")

UP = b"\x1b[A"
CTRL_C = b"\x03"
CTRL_D = b"\x04"


class Terminal:
    """One `tally ...` process on a pty. `screen` is all it wrote, escape sequences and
    carriage returns removed; `expect` waits for text to appear after what was seen before."""

    def __init__(self, *args: str, env: dict[str, str] | None = None) -> None:
        environment = {
            k: v for k, v in os.environ.items() if not k.startswith(("OPENAI", "ANTHROPIC"))
        }
        environment.update({"TERM": "xterm", "INPUTRC": os.devnull, "PYTHONUNBUFFERED": "1"})
        environment.update(env or {})
        self._raw = b""
        self._seen = 0  # `expect` searches the screen from here
        self.returncode: int | None = None
        self.pid, self._fd = pty.fork()
        if self.pid == 0:  # the child: become `python -m backend ...` at once
            os.chdir(ROOT)
            os.execve(sys.executable, [sys.executable, "-m", "backend", *args], environment)
        # Wide enough that readline never wraps a typed line.
        fcntl.ioctl(self._fd, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 200, 0, 0))

    @property
    def raw(self) -> bytes:
        """All the process wrote, escape sequences included."""
        return self._raw

    @property
    def screen(self) -> str:
        return ESCAPES.sub(b"", self._raw).decode("utf-8", "replace")

    def send(self, keys: bytes | str) -> None:
        os.write(self._fd, keys.encode() if isinstance(keys, str) else keys)

    def expect(self, text: str, *, timeout: float = DEADLINE_S) -> str:
        """Wait until `text` (a regex) appears on the screen after the last match; the screen
        up to its end."""
        pattern = re.compile(text)
        deadline = time.monotonic() + timeout
        while True:
            found = pattern.search(self.screen, self._seen)
            if found:
                self._seen = found.end()
                return self.screen[: found.end()]
            if not self._read(deadline):
                raise AssertionError(f"{text!r} never appeared; the screen:\n{self.screen}")

    def wait_reading(self, *, timeout: float = DEADLINE_S) -> None:
        """Until the process waits for a key: its main thread blocked in readline's select().
        CPython's readline notices a SIGINT only while it waits, so a Ctrl-C sent in the
        instant after the prompt was drawn (or a key echoed) would go unseen until the next
        key; a person cannot type that fast, a test can. Without /proc, returns at once."""
        wchan = Path(f"/proc/{self.pid}/wchan")
        if not wchan.exists():
            return
        until_blocking(
            lambda: any(word in wchan.read_text() for word in ("poll_schedule", "select")),
            lambda: f"the process to wait for a key; the screen:\n{self.screen}",
            timeout_s=timeout,
            poll_s=0.01,
        )

    def wait_exit(self, *, timeout: float = DEADLINE_S) -> int:
        """Read until the process closes the terminal and has exited; its exit code."""
        deadline = time.monotonic() + timeout
        while self._read(deadline):
            pass
        while self.returncode is None:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
            elif time.monotonic() > deadline:
                raise AssertionError(f"still running after {timeout} s; the screen:\n{self.screen}")
            else:
                select.select([], [], [], 0.05)  # the pty is closed: poll for the exit status
        return self.returncode

    def _read(self, deadline: float) -> bool:
        """Read what is there, waiting until the deadline; False at the deadline or the end."""
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return False
        ready, _, _ = select.select([self._fd], [], [], remaining)
        if not ready:
            return False
        try:
            data = os.read(self._fd, 65536)
        except OSError as exc:  # Linux: EIO once every holder of the other end has closed it
            if exc.errno != errno.EIO:
                raise
            data = b""
        self._raw += data
        return bool(data)

    def close(self) -> None:
        if self.returncode is None:
            try:
                os.kill(self.pid, signal.SIGKILL)
                os.waitpid(self.pid, 0)
            except (ChildProcessError, ProcessLookupError):
                pass
        os.close(self._fd)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
