"""Paths inside a tenant's workspace directory, checked, and the files they name, opened safely.

Invariant: nothing reached through this module lies outside the directory it is rooted at. A
path is checked twice: as text (`parse_path`: relative, no `..`, no backslash or NUL), then on
disk (`resolve_inside`: its real path lies inside the root's real path). The real path's
components are then opened one at a time from the root with O_NOFOLLOW, so a symlink swapped in
after the check is refused (ELOOP) rather than followed; writes and walks never follow a
symlink at all. Errors name a path only as the model gave it, never a host path.
"""

from __future__ import annotations

import errno
import os
import re
import secrets
import stat
from collections.abc import Generator, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass

from backend.tools.base import ToolFailed

_WINDOWS_ABSOLUTE = re.compile(r"[A-Za-z]:")
_DIRECTORY_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# O_NONBLOCK: opening a FIFO must not hang the tool; it is then refused as not a regular file.
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_APPEND_FLAGS = (
    os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
)
_TEMP_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC

MAX_PATH_CHARS = 1024
# Walking a tree holds one descriptor per level, so folders nest at most this deep.
MAX_DEPTH = 32


def parse_path(raw: object, *, allow_root: bool) -> tuple[str, ...]:
    """The components of a path relative to the workspace; ToolFailed for anything else.

    Refusals never repeat the path: an absolute one may be a host path."""
    if raw is None and allow_root:
        return ()
    if not isinstance(raw, str):
        raise ToolFailed("path must be a string")
    if "\x00" in raw:
        raise ToolFailed("path must not contain NUL characters")
    if raw.startswith(("/", "\\")) or _WINDOWS_ABSOLUTE.match(raw):
        raise ToolFailed("absolute paths are not allowed; give a path relative to the workspace")
    if "\\" in raw:
        raise ToolFailed("path must separate folders with /, not backslashes")
    if len(raw) > MAX_PATH_CHARS:
        raise ToolFailed(f"path is longer than {MAX_PATH_CHARS} characters")
    parts = tuple(part for part in raw.split("/") if part not in ("", "."))
    if ".." in parts:
        raise ToolFailed("path must not contain '..'")
    if not parts and not allow_root:
        raise ToolFailed("path must not be empty")
    return parts


def resolve_inside(root: str, parts: tuple[str, ...]) -> tuple[str, ...]:
    """The components, below `root`, of the real path that `parts` lead to (symlinks resolved);
    ToolFailed if that is not inside `root`, which is itself a real path."""
    real = os.path.realpath(os.path.join(root, *parts))
    if real == root:
        return ()
    if not real.startswith(root + os.sep):
        raise ToolFailed("path leads outside the workspace")
    return tuple(real[len(root) + 1 :].split(os.sep))


@contextmanager
def report_os_errors_as(shown: str) -> Iterator[None]:
    """OSError as ToolFailed, naming only `shown` (the path as the model gave it): an OSError's
    own text carries the host path."""
    try:
        yield
    except FileNotFoundError as exc:
        raise ToolFailed(f"{shown}: no such file or directory") from exc
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise ToolFailed(f"{shown}: a symbolic link here is not followed") from exc
        raise ToolFailed(f"{shown}: {exc.strerror or 'input/output error'}") from exc


@contextmanager
def open_directory_nofollow(root: str, parts: tuple[str, ...], *, create: bool) -> Iterator[int]:
    """A descriptor of `root/parts`, reached with O_NOFOLLOW at every step: the parts come from
    a real path, so a symlink met here was swapped in since, and is refused (ELOOP)."""
    fd = os.open(root, _DIRECTORY_FLAGS)
    try:
        for part in parts:
            if create:
                with suppress(FileExistsError):
                    os.mkdir(part, 0o700, dir_fd=fd)
            child = os.open(part, _DIRECTORY_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = child
        yield fd
    finally:
        os.close(fd)


@dataclass(frozen=True, slots=True)
class Entry:
    """One thing a walk found; its path is never followed to tell what it is."""

    path: str  # relative to the walked directory, folders separated by /
    kind: str  # "directory", "file", "link", "special" or "too deep"
    size: int = 0


def walk_without_following(
    directory_fd: int, prefix: str = "", depth: int = 0
) -> Generator[Entry, None, None]:
    """Everything below a directory in sorted order. Symlinks are reported, never followed."""
    with os.scandir(directory_fd) as scan:
        entries = sorted(scan, key=lambda entry: entry.name)
    for entry in entries:
        path = prefix + entry.name
        if entry.is_symlink():
            yield Entry(path, "link")
        elif entry.is_dir(follow_symlinks=False):
            yield Entry(path, "directory" if depth < MAX_DEPTH else "too deep")
            if depth < MAX_DEPTH:
                fd = os.open(entry.name, _DIRECTORY_FLAGS, dir_fd=directory_fd)
                try:
                    yield from walk_without_following(fd, path + "/", depth + 1)
                finally:
                    os.close(fd)
        elif entry.is_file(follow_symlinks=False):
            yield Entry(path, "file", entry.stat(follow_symlinks=False).st_size)
        else:
            yield Entry(path, "special")


def existing_size(root: str, parent: tuple[str, ...], name: str, shown: str) -> int | None:
    """The size of the regular file `root/parent/name`, or None if there is none yet."""
    try:
        with open_directory_nofollow(root, parent, create=False) as at:
            info = os.stat(name, dir_fd=at, follow_symlinks=False)
    except FileNotFoundError:
        return None
    _require_regular(info.st_mode, shown)
    return info.st_size


def _require_regular(mode: int, shown: str) -> None:
    if stat.S_ISLNK(mode):
        raise ToolFailed(f"{shown} is a symbolic link; write_file does not write through links")
    if stat.S_ISDIR(mode):
        raise ToolFailed(f"{shown} is a folder; use list_files to see what it holds")
    if not stat.S_ISREG(mode):
        raise ToolFailed(f"{shown} is not a regular file")


def read_regular_file(directory_fd: int, name: str, limit: int, shown: str) -> bytes:
    """At most `limit + 1` bytes of a regular file (one more, to tell a file that is too big)."""
    fd = os.open(name, _READ_FLAGS, dir_fd=directory_fd)
    try:
        _require_regular(os.fstat(fd).st_mode, shown)
        with os.fdopen(fd, "rb", closefd=False) as file:
            return file.read(limit + 1)
    finally:
        os.close(fd)


def replace_file(directory_fd: int, name: str, data: bytes) -> None:
    """Write a whole file atomically: a reader sees the old content or the new, never half.
    A symlink swapped in meanwhile is replaced itself; rename never writes through it."""
    temporary = f".tally-write-{secrets.token_hex(8)}.tmp"
    fd = os.open(temporary, _TEMP_FLAGS, 0o600, dir_fd=directory_fd)
    try:
        with os.fdopen(fd, "wb") as file:
            file.write(data)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, name, src_dir_fd=directory_fd, dst_dir_fd=directory_fd)
    except BaseException:
        with suppress(FileNotFoundError):
            os.unlink(temporary, dir_fd=directory_fd)
        raise
    os.fsync(directory_fd)  # so the rename, too, survives a crash


def append_to_file(directory_fd: int, name: str, data: bytes, shown: str) -> None:
    """Add to the end of a regular file, creating it; never through a symlink."""
    with os.fdopen(os.open(name, _APPEND_FLAGS, 0o600, dir_fd=directory_fd), "ab") as file:
        _require_regular(os.fstat(file.fileno()).st_mode, shown)
        file.write(data)
        file.flush()
        os.fsync(file.fileno())
