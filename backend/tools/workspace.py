"""The workspace tools: `read_file`, `list_files` and `write_file` over one directory per tenant,
`<base_dir>/<tenant_id>/`, and nothing outside it.

Every path reaches the disk through `workspace_paths`, which checks it and opens it without
following a symlink swapped in after the check. Here live the tools' arguments, the rendering of
results and the limits of a write. Results and errors name paths only as the model gave them,
never a host path.
"""

from __future__ import annotations

import asyncio
import os
import threading
from contextlib import closing, suppress
from itertools import islice
from pathlib import Path

from backend.domain.tenants import TENANT_ID
from backend.settings.tools import WorkspaceSettings
from backend.tools.base import Tool, ToolContext, ToolFailed
from backend.tools.workspace_paths import (
    MAX_DEPTH,
    Entry,
    append_to_file,
    existing_size,
    open_directory_nofollow,
    parse_path,
    read_regular_file,
    replace_file,
    report_os_errors_as,
    resolve_inside,
    walk_without_following,
)

DEFAULT_MAX_LINES = 400
MAX_LINES = 2000
MAX_LISTED_ENTRIES = 500


def _describe(entry: Entry) -> str:
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
        if not TENANT_ID.fullmatch(tenant_id):
            raise ToolFailed("this tenant has no workspace")
        with report_os_errors_as("the workspace"):
            self._base_dir.mkdir(parents=True, exist_ok=True)
            with suppress(FileExistsError):
                (self._base_dir / tenant_id).mkdir(mode=0o700)
        return os.path.realpath(self._base_dir / tenant_id)

    def read_text(self, tenant_id: str, parts: tuple[str, ...]) -> str:
        """The text of a UTF-8 file; a symlink is followed only when it stays inside."""
        shown = "/".join(parts)
        root = self.root(tenant_id)
        inner = resolve_inside(root, parts) or (".",)  # a link to the workspace itself: a folder
        limit = self._settings.max_file_bytes
        with (
            report_os_errors_as(shown),
            open_directory_nofollow(root, inner[:-1], create=False) as at,
        ):
            data = read_regular_file(at, inner[-1], limit, shown)
        if len(data) > limit:
            raise ToolFailed(f"{shown} is larger than the {limit} bytes a read may take")
        return _decode(data, shown)

    def list_folder(self, tenant_id: str, parts: tuple[str, ...]) -> str:
        """The entries below a folder, sorted, at most MAX_LISTED_ENTRIES of them."""
        shown = "/".join(parts)
        root = self.root(tenant_id)
        inner = resolve_inside(root, parts)
        prefix = f"{shown}/" if shown else ""
        with (
            report_os_errors_as(shown or "."),
            open_directory_nofollow(root, inner, create=False) as at,
            closing(walk_without_following(at, prefix)) as entries,
        ):
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
        parent = resolve_inside(root, parts[:-1])
        if len(parent) > MAX_DEPTH:
            raise ToolFailed(f"folders nest at most {MAX_DEPTH} deep")
        with self._locks.setdefault(tenant_id, threading.Lock()), report_os_errors_as(shown):
            existing = existing_size(root, parent, parts[-1], shown)
            size = (existing or 0) + len(data) if append else len(data)
            self._check_limits(root, shown, existing, size)
            with open_directory_nofollow(root, parent, create=True) as at:
                if append:
                    append_to_file(at, parts[-1], data, shown)
                else:
                    replace_file(at, parts[-1], data)
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
        with (
            open_directory_nofollow(root, (), create=False) as at,
            closing(walk_without_following(at)) as entries,
        ):
            files = [entry.size for entry in entries if entry.kind == "file"]
        if existing is None and len(files) >= limits.max_files:
            raise ToolFailed(f"the workspace already holds its limit of {limits.max_files} files")
        total = sum(files) - (existing or 0) + size
        if total > limits.max_total_bytes:
            raise ToolFailed(
                f"the workspace would hold {total} bytes; its limit is {limits.max_total_bytes}"
            )


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
