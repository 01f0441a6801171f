"""MEMORY.md files: the default tenant's is the top-level file, every other scope has its own.

Invariants:
- Paths never contain raw input: tenant ids are checked slugs and scope keys are hashed, so
  `data_dir/memory/<tenant_id>/tenant.md` or `.../user-<sha256 of scope_key>.md`.
- Every write is a read-modify-write under an inter-process lock (`<file>.lock`), and replaces
  the file atomically: temp file in the same directory, fsync, `os.replace`, fsync of the
  directory. A failed write removes its temp file, leaves the file byte-identical and raises
  MemoryWriteFailed.
- Readers take no lock: `os.replace` means they see the old file or the new one, never half.
- Blocking work (locking, file I/O, parsing) runs in a worker thread; the event loop never waits.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import stat
import tempfile
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Sequence
from contextlib import suppress
from pathlib import Path
from typing import TypeVar

from filelock import FileLock, Timeout

from backend.domain.tenants import DEFAULT_TENANT
from backend.memory.base import (
    MemoryEntryNotFound,
    MemoryUnavailable,
    MemoryWriteFailed,
    check_limit,
    check_scope,
    require_provenance,
)
from backend.memory.entries import (
    MemoryDocument,
    MemoryEntry,
    NewEntry,
    normalise_replacement,
    parse_document,
    prepare_entry,
    render_lines,
    standard_header,
    utc_today,
)
from backend.memory.relevance import rank_entries

T = TypeVar("T")
# What a change to a document decides: the new document to write (None: write nothing), and
# what the caller gets back.
Change = Callable[[MemoryDocument], tuple[MemoryDocument | None, T]]
StatKey = tuple[int, int, int, int]

NEW_FILE_MODE = 0o600  # memory holds users' facts: private unless the operator widens it
CACHED_DOCUMENTS = 64


class _DocumentCache:
    """Parsed documents by path, valid while the file's (device, inode, mtime, size) match.

    `os.replace` gives every write a new inode, so a rewrite is always noticed; a prompt build
    over an unchanged 10,000-line MEMORY.md costs one fstat instead of a parse.
    """

    def __init__(self, capacity: int) -> None:
        self._capacity = capacity
        self._documents: OrderedDict[Path, tuple[StatKey, MemoryDocument]] = OrderedDict()
        self._lock = threading.Lock()  # worker threads share the cache

    def get(self, path: Path, key: StatKey) -> MemoryDocument | None:
        with self._lock:
            cached = self._documents.get(path)
            if cached is None or cached[0] != key:
                return None
            self._documents.move_to_end(path)
            return cached[1]

    def put(self, path: Path, key: StatKey, document: MemoryDocument) -> None:
        with self._lock:
            self._documents[path] = (key, document)
            self._documents.move_to_end(path)
            while len(self._documents) > self._capacity:
                self._documents.popitem(last=False)


class FileMemoryStore:
    """MemoryStore over MEMORY.md files (see the module docstring for the invariants)."""

    def __init__(self, default_path: Path, data_dir: Path, *, lock_timeout_s: float = 30.0) -> None:
        # Resolved, so a symlinked MEMORY.md is written through rather than replaced.
        self._default_path = Path(default_path).resolve()
        self._data_dir = Path(data_dir)
        self._lock_timeout_s = lock_timeout_s
        self._cache = _DocumentCache(CACHED_DOCUMENTS)
        # Writers to one file queue here in the loop instead of each holding a worker thread
        # while it waits for the file lock.
        self._local_locks: weakref.WeakValueDictionary[Path, asyncio.Lock] = (
            weakref.WeakValueDictionary()
        )

    def path_for(self, *, tenant_id: str, scope_key: str) -> Path:
        """The file of one scope; raises InvalidInput for a tenant id that is not a slug."""
        check_scope(tenant_id, scope_key)
        if tenant_id == DEFAULT_TENANT and not scope_key:
            return self._default_path
        if scope_key:
            name = f"user-{hashlib.sha256(scope_key.encode()).hexdigest()}.md"
        else:
            name = "tenant.md"
        return self._data_dir / "memory" / tenant_id / name

    async def create_default_file(self) -> bool:
        """Writes the default tenant's MEMORY.md with the standard header when it is missing.

        The file is the deployment's (git-ignored in a checkout): it is made at the first start,
        so a newcomer finds memory where the design puts it. True when it was created.
        """
        if self._default_path.exists():
            return False

        def create(document: MemoryDocument) -> tuple[MemoryDocument | None, bool]:
            # Under the lock: another process may have made it meanwhile.
            return (None, False) if self._default_path.exists() else (document, True)

        return await self._update(DEFAULT_TENANT, "", create)

    async def read(self, *, tenant_id: str, scope_key: str) -> MemoryDocument:
        path = self.path_for(tenant_id=tenant_id, scope_key=scope_key)
        unchanged = self._unchanged(path)
        if unchanged is not None:
            return unchanged
        header = standard_header(tenant_id, scope_key)
        try:
            return await asyncio.to_thread(self._load, path, header)
        except OSError as exc:
            raise MemoryUnavailable(f"cannot read {path.name}: {exc.strerror}") from exc

    async def append(
        self, *, tenant_id: str, scope_key: str, entries: Sequence[NewEntry]
    ) -> list[MemoryEntry]:
        today = utc_today()
        lines = [prepare_entry(entry, today=today).line for entry in entries]
        if not lines:
            return []

        def append_lines(document: MemoryDocument) -> tuple[MemoryDocument, list[MemoryEntry]]:
            updated = parse_document(document.stored_text + render_lines(lines))
            return updated, list(updated.entries[-len(lines) :])

        return await self._update(tenant_id, scope_key, append_lines)

    async def append_once(self, *, tenant_id: str, scope_key: str, entry: NewEntry) -> MemoryEntry:
        provenance = require_provenance(entry)
        fields = prepare_entry(entry, today=utc_today())

        def append_unless_present(
            document: MemoryDocument,
        ) -> tuple[MemoryDocument | None, MemoryEntry]:
            for existing in document.entries:
                if existing.provenance == provenance:
                    return None, existing
            updated = parse_document(document.stored_text + render_lines([fields.line]))
            return updated, updated.entries[-1]

        return await self._update(tenant_id, scope_key, append_unless_present)

    async def delete(self, *, tenant_id: str, scope_key: str, entry_id: str) -> None:
        def remove(document: MemoryDocument) -> tuple[MemoryDocument, None]:
            kept = [
                line.text
                for line in document.lines
                if line.entry is None or line.entry.id != entry_id
            ]
            if len(kept) == len(document.lines):
                raise MemoryEntryNotFound(entry_id)
            return parse_document(render_lines(kept)), None

        await self._update(tenant_id, scope_key, remove)

    async def replace(self, *, tenant_id: str, scope_key: str, content: str) -> MemoryDocument:
        replacement = parse_document(
            normalise_replacement(content, standard_header(tenant_id, scope_key))
        )
        return await self._update(tenant_id, scope_key, lambda _: (replacement, replacement))

    async def search(
        self, *, tenant_id: str, scope_key: str, query: str, limit: int
    ) -> list[MemoryEntry]:
        check_limit(limit)
        document = await self.read(tenant_id=tenant_id, scope_key=scope_key)
        return rank_entries(document.current_entries, query, limit)

    async def recent(self, *, tenant_id: str, scope_key: str, limit: int) -> list[MemoryEntry]:
        check_limit(limit)
        document = await self.read(tenant_id=tenant_id, scope_key=scope_key)
        return list(document.current_entries[-limit:]) if limit else []

    async def _update(self, tenant_id: str, scope_key: str, change: Change[T]) -> T:
        path = self.path_for(tenant_id=tenant_id, scope_key=scope_key)
        header = standard_header(tenant_id, scope_key)
        local_lock = self._local_locks.setdefault(path, asyncio.Lock())
        async with local_lock:
            return await asyncio.to_thread(self._update_locked, path, header, change)

    def _update_locked(self, path: Path, header: Sequence[str], change: Change[T]) -> T:
        """Read, change and write one file, all under its inter-process lock (worker thread)."""
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            lock = FileLock(f"{path}.lock", timeout=self._lock_timeout_s)
            with lock:
                updated, result = change(self._load(path, header))
                if updated is not None:
                    self._store(path, updated)
            return result
        except Timeout as exc:
            raise MemoryWriteFailed(f"{path.name} stayed locked by another process") from exc
        except OSError as exc:
            raise MemoryWriteFailed(f"cannot write {path.name}: {exc.strerror}") from exc

    def _unchanged(self, path: Path) -> MemoryDocument | None:
        """The parsed document of a file unchanged since it was last read, found with one stat
        in the loop: every turn reads memory, and a worker thread for a cache hit cost more
        than the stat (a local disk answers a stat in microseconds)."""
        try:
            key = _stat_key(os.stat(path))
        except OSError:
            return None  # missing or unreadable: the worker thread's read says which
        return self._cache.get(path, key)

    def _load(self, path: Path, header: Sequence[str]) -> MemoryDocument:
        """The parsed file; a missing file reads as a new one (the header alone)."""
        try:
            file = path.open("rb")
        except FileNotFoundError:
            return parse_document(render_lines(header))
        with file:
            # fstat of the open file, so the key describes exactly the bytes read below.
            key = _stat_key(os.fstat(file.fileno()))
            cached = self._cache.get(path, key)
            if cached is not None:
                return cached
            # surrogateescape: bytes that are not UTF-8 survive a rewrite unchanged.
            document = parse_document(file.read().decode("utf-8-sig", "surrogateescape"))
        self._cache.put(path, key, document)
        return document

    def _store(self, path: Path, document: MemoryDocument) -> None:
        data = document.stored_text.encode("utf-8", "surrogateescape")
        try:
            mode = stat.S_IMODE(path.stat().st_mode)
        except FileNotFoundError:
            mode = NEW_FILE_MODE
        self._cache.put(path, _write_atomically(path, data, mode), document)


def _write_atomically(path: Path, data: bytes, mode: int) -> StatKey:
    """Replace `path` with `data` or leave it untouched; return the new file's stat key."""
    fd, temp_name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as temp:
            os.fchmod(temp.fileno(), mode)
            temp.write(data)
            temp.flush()
            os.fsync(temp.fileno())
            key = _stat_key(os.fstat(temp.fileno()))
        os.replace(temp_name, path)
    except BaseException:
        with suppress(OSError):
            os.unlink(temp_name)
        raise
    # The rename is only durable once the directory entry is on disk too.
    directory = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)
    return key


def _stat_key(result: os.stat_result) -> StatKey:
    return (result.st_dev, result.st_ino, result.st_mtime_ns, result.st_size)
