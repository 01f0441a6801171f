"""The workspace tools: `read_file`, `list_files` and `write_file` over one directory per tenant,
`<base_dir>/<tenant_id>/`, and nothing outside it.

A path is checked twice: as text (relative, no `..`, no backslash or NUL), then on disk (its real
path lies inside the tenant's real directory). Files are then reached one component at a time
from the tenant's directory with O_NOFOLLOW, so a symlink swapped in after the check is refused
rather than followed. Results and errors name paths only as the model gave them, never a host
path.
"""

from __future__ import annotations

import asyncio
import errno
import os
import re
import secrets
import stat
import threading
from collections.abc import Generator, Iterator
from contextlib import closing, contextmanager, suppress
from dataclasses import dataclass
from itertools import islice
from pathlib import Path

from backend.tool_settings import WorkspaceSettings
from backend.tools.base import Tool, ToolContext, ToolFailed

# backend.settings.TENANT_ID, which this layer may not import: checked again here because the
# tenant id becomes a directory name.
_TENANT_ID = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}")
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
DEFAULT_MAX_LINES = 400
MAX_LINES = 2000
MAX_LISTED_ENTRIES = 500


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


def _inside(root: str, parts: tuple[str, ...]) -> tuple[str, ...]:
    """The components, below `root`, of the real path that `parts` lead to (symlinks resolved);
    ToolFailed if that is not inside `root`, which is itself a real path."""
    real = os.path.realpath(os.path.join(root, *parts))
    if real == root:
        return ()
    if not real.startswith(root + os.sep):
        raise ToolFailed("path leads outside the workspace")
    return tuple(real[len(root) + 1 :].split(os.sep))


@contextmanager
def _os_errors(shown: str) -> Iterator[None]:
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
def _open_directory(root: str, parts: tuple[str, ...], *, create: bool) -> Iterator[int]:
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
class _Entry:
    path: str  # relative to the walked directory, folders separated by /
    kind: str  # "directory", "file", "link", "special" or "too deep"
    size: int = 0


def _walk(directory_fd: int, prefix: str = "", depth: int = 0) -> Generator[_Entry, None, None]:
    """Everything below a directory in sorted order. Symlinks are reported, never followed."""
    with os.scandir(directory_fd) as scan:
        entries = sorted(scan, key=lambda entry: entry.name)
    for entry in entries:
        path = prefix + entry.name
        if entry.is_symlink():
            yield _Entry(path, "link")
        elif entry.is_dir(follow_symlinks=False):
            yield _Entry(path, "directory" if depth < MAX_DEPTH else "too deep")
            if depth < MAX_DEPTH:
                fd = os.open(entry.name, _DIRECTORY_FLAGS, dir_fd=directory_fd)
                try:
                    yield from _walk(fd, path + "/", depth + 1)
                finally:
                    os.close(fd)
        elif entry.is_file(follow_symlinks=False):
            yield _Entry(path, "file", entry.stat(follow_symlinks=False).st_size)
        else:
            yield _Entry(path, "special")


def _describe(entry: _Entry) -> str:
    descriptions = {
        "directory": f"{entry.path}/",
        "too deep": f"{entry.path}/ (not listed: nested too deep)",
        "file": f"{entry.path} ({entry.size} bytes)",
        "link": f"{entry.path} (symbolic link, not followed)",
        "special": f"{entry.path} (not a regular file)",
    }
    return descriptions[entry.kind]


def render_lines(shown: str, text: str, *, start: int, count: int, is_numbered: bool) -> str:
    """A header `[File: <path> | Lines: <n>]` (or `<first>-<last> of <n>` for part of the file),
    then the lines; numbered ones are right-aligned to 3 digits and followed by `| `."""
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()  # a final newline ends the last line; it does not start another
    total = len(lines)
    if total and start > total:
        raise ToolFailed(f"start_line {start} is past the end: {shown} has {total} lines")
    shown_lines = [line.removesuffix("\r") for line in lines[start - 1 : start - 1 + count]]
    end = start - 1 + len(shown_lines)
    span = str(total) if start == 1 and end == total else f"{start}-{end} of {total}"
    width = max(3, len(str(end)))
    if is_numbered:
        shown_lines = [
            f"{number:>{width}}|" + (f" {line}" if line else "")  # no trailing space
            for number, line in enumerate(shown_lines, start)
        ]
    return "\n".join([f"[File: {shown} | Lines: {span}]", *shown_lines])


def _decode(data: bytes, shown: str) -> str:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ToolFailed(f"{shown} is not a text file (not UTF-8)") from exc
    if "\x00" in text:
        raise ToolFailed(f"{shown} is not a text file (it holds NUL bytes)")
    return text


class Workspace:
    """The tenants' directories under `base_dir`, one each, and the blocking work on them."""

    def __init__(self, base_dir: Path, settings: WorkspaceSettings) -> None:
        self._base_dir = base_dir
        self._settings = settings
        # A write's quota check and the write itself happen under the tenant's lock, so two
        # calls of one process cannot both pass the check for the last free bytes.
        self._locks: dict[str, threading.Lock] = {}

    def root(self, tenant_id: str) -> str:
        """The real path of the tenant's directory, created (mode 0o700) on first use."""
        if not _TENANT_ID.fullmatch(tenant_id):
            raise ToolFailed("this tenant has no workspace")
        with _os_errors("the workspace"):
            self._base_dir.mkdir(parents=True, exist_ok=True)
            with suppress(FileExistsError):
                (self._base_dir / tenant_id).mkdir(mode=0o700)
        return os.path.realpath(self._base_dir / tenant_id)

    def read_text(self, tenant_id: str, parts: tuple[str, ...]) -> str:
        """The text of a UTF-8 file; a symlink is followed only when it stays inside."""
        shown = "/".join(parts)
        root = self.root(tenant_id)
        inner = _inside(root, parts) or (".",)  # a link to the workspace itself: a folder
        limit = self._settings.max_file_bytes
        with _os_errors(shown), _open_directory(root, inner[:-1], create=False) as at:
            data = _read_regular(at, inner[-1], limit, shown)
        if len(data) > limit:
            raise ToolFailed(f"{shown} is larger than the {limit} bytes a read may take")
        return _decode(data, shown)

    def list_folder(self, tenant_id: str, parts: tuple[str, ...]) -> str:
        """The entries below a folder, sorted, at most MAX_LISTED_ENTRIES of them."""
        shown = "/".join(parts)
        root = self.root(tenant_id)
        inner = _inside(root, parts)
        prefix = f"{shown}/" if shown else ""
        with _os_errors(shown or "."), _open_directory(root, inner, create=False) as at:
            with closing(_walk(at, prefix)) as entries:
                lines = [_describe(entry) for entry in islice(entries, MAX_LISTED_ENTRIES)]
                is_cut = next(entries, None) is not None
        if not lines:
            return f"{prefix} is empty" if shown else "the workspace is empty"
        if is_cut:
            lines.append(f"(stopped at {MAX_LISTED_ENTRIES} entries; list a folder to see more)")
        return "\n".join(lines)

    def write_file(
        self, tenant_id: str, parts: tuple[str, ...], data: bytes, *, append: bool
    ) -> str:
        """Write or append to a file, never through a symlink, within the workspace's limits."""
        shown = "/".join(parts)
        root = self.root(tenant_id)
        parent = _inside(root, parts[:-1])
        if len(parent) > MAX_DEPTH:
            raise ToolFailed(f"folders nest at most {MAX_DEPTH} deep")
        with self._locks.setdefault(tenant_id, threading.Lock()), _os_errors(shown):
            existing = _existing_size(root, parent, parts[-1], shown)
            size = (existing or 0) + len(data) if append else len(data)
            self._check_limits(root, shown, existing, size)
            with _open_directory(root, parent, create=True) as at:
                if append:
                    _append(at, parts[-1], data, shown)
                else:
                    _replace(at, parts[-1], data)
        if append:
            return f"appended {len(data)} bytes to {shown} (now {size} bytes)"
        return f"wrote {len(data)} bytes to {shown}"

    def _check_limits(self, root: str, shown: str, existing: int | None, size: int) -> None:
        limits = self._settings
        if size > limits.max_file_bytes:
            raise ToolFailed(
                f"{shown} would be {size} bytes; a file may hold {limits.max_file_bytes}"
            )
        # Counted afresh on every write: there is no tally on the side to drift from the disk.
        with _open_directory(root, (), create=False) as at, closing(_walk(at)) as entries:
            files = [entry.size for entry in entries if entry.kind == "file"]
        if existing is None and len(files) >= limits.max_files:
            raise ToolFailed(f"the workspace already holds its limit of {limits.max_files} files")
        total = sum(files) - (existing or 0) + size
        if total > limits.max_total_bytes:
            raise ToolFailed(
                f"the workspace would hold {total} bytes; its limit is {limits.max_total_bytes}"
            )


def _existing_size(root: str, parent: tuple[str, ...], name: str, shown: str) -> int | None:
    """The size of the file to be written, or None if there is none yet."""
    try:
        with _open_directory(root, parent, create=False) as at:
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


def _read_regular(directory_fd: int, name: str, limit: int, shown: str) -> bytes:
    """At most `limit + 1` bytes of a regular file (one more, to tell a file that is too big)."""
    fd = os.open(name, _READ_FLAGS, dir_fd=directory_fd)
    try:
        _require_regular(os.fstat(fd).st_mode, shown)
        with os.fdopen(fd, "rb", closefd=False) as file:
            return file.read(limit + 1)
    finally:
        os.close(fd)


def _replace(directory_fd: int, name: str, data: bytes) -> None:
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


def _append(directory_fd: int, name: str, data: bytes, shown: str) -> None:
    with os.fdopen(os.open(name, _APPEND_FLAGS, 0o600, dir_fd=directory_fd), "ab") as file:
        _require_regular(os.fstat(file.fileno()).st_mode, shown)
        file.write(data)
        file.flush()
        os.fsync(file.fileno())


def _flag(arguments: dict[str, object], key: str) -> bool:
    value = arguments.get(key, False)
    if not isinstance(value, bool):
        raise ToolFailed(f"{key} must be true or false")
    return value


def _number(arguments: dict[str, object], key: str, default: int) -> int:
    value = arguments.get(key, default)
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ToolFailed(f"{key} must be a whole number of at least 1")
    return value


class ReadFileTool:
    name = "read_file"
    description = (
        "Read a UTF-8 text file of the workspace. Returns `[File: <path> | Lines: <n>]` and the "
        f"lines; {DEFAULT_MAX_LINES} lines unless max_lines says more (at most {MAX_LINES})."
    )
    parameters: dict[str, object] = {
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "relative to the workspace, e.g. notes/a.md"},
            "show_line_numbers": {"type": "boolean", "default": False},
            "start_line": {"type": "integer", "minimum": 1, "default": 1},
            "max_lines": {"type": "integer", "minimum": 1, "maximum": MAX_LINES},
        },
        "required": ["path"],
        "additionalProperties": False,
    }

    def __init__(self, workspace: Workspace) -> None:
        self._workspace = workspace

    async def run(self, arguments: dict[str, object], context: ToolContext) -> str:
        parts = parse_path(arguments.get("path"), allow_root=False)
        is_numbered = _flag(arguments, "show_line_numbers")
        start = _number(arguments, "start_line", 1)
        count = min(_number(arguments, "max_lines", DEFAULT_MAX_LINES), MAX_LINES)
        text = await asyncio.to_thread(self._workspace.read_text, context.tenant_id, parts)
        shown = "/".join(parts)
        return render_lines(shown, text, start=start, count=count, is_numbered=is_numbered)


class ListFilesTool:
    name = "list_files"
    description = (
        "List the workspace's files and folders (or those below `path`), one a line: folders "
        f"end with /, files show their size. At most {MAX_LISTED_ENTRIES} entries."
    )
    parameters: dict[str, object] = {
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "a folder; the workspace root if omitted"}
        },
        "additionalProperties": False,
    }

    def __init__(self, workspace: Workspace) -> None:
        self._workspace = workspace

    async def run(self, arguments: dict[str, object], context: ToolContext) -> str:
        parts = parse_path(arguments.get("path"), allow_root=True)
        return await asyncio.to_thread(self._workspace.list_folder, context.tenant_id, parts)


class WriteFileTool:
    name = "write_file"
    description = (
        "Write a UTF-8 text file in the workspace, creating its folders; `mode` append adds to "
        "the end instead of replacing the file."
    )
    parameters: dict[str, object] = {
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "relative to the workspace, e.g. notes/a.md"},
            "content": {"type": "string"},
            "mode": {"type": "string", "enum": ["overwrite", "append"], "default": "overwrite"},
        },
        "required": ["path", "content"],
        "additionalProperties": False,
    }

    def __init__(self, workspace: Workspace) -> None:
        self._workspace = workspace

    async def run(self, arguments: dict[str, object], context: ToolContext) -> str:
        parts = parse_path(arguments.get("path"), allow_root=False)
        content = arguments.get("content")
        if not isinstance(content, str):
            raise ToolFailed("content must be a string")
        mode = arguments.get("mode", "overwrite")
        if mode not in ("overwrite", "append"):
            raise ToolFailed("mode must be overwrite or append")
        try:
            data = content.encode("utf-8")
        except UnicodeEncodeError as exc:  # a lone surrogate from a malformed JSON escape
            raise ToolFailed("content is not valid Unicode text") from exc
        return await asyncio.to_thread(
            self._workspace.write_file, context.tenant_id, parts, data, append=mode == "append"
        )


def workspace_tools(base_dir: Path, settings: WorkspaceSettings) -> list[Tool]:
    """read_file, list_files and write_file over `base_dir / <tenant_id>` (the tenant comes from
    each call's ToolContext.tenant_id, a validated lowercase slug)."""
    workspace = Workspace(base_dir, settings)
    return [ReadFileTool(workspace), ListFilesTool(workspace), WriteFileTool(workspace)]
