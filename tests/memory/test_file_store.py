"""The file store: paths, atomic writes under real faults, two processes, hand-edited files."""

from __future__ import annotations

import datetime as dt
import errno
import hashlib
import itertools
import os
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from filelock import FileLock

from backend.errors import InvalidInput
from backend.memory.base import MemoryWriteFailed
from backend.memory.entries import NewEntry, render_lines, standard_header
from backend.memory.file_store import FileMemoryStore
from tests.waiting import until

ROOT = Path(__file__).resolve().parents[2]
DAY = dt.date(2024, 5, 17)
# What a new default MEMORY.md holds (MEMORY.example.md shows it beside a few lines).
NEW_MEMORY_FILE = render_lines(standard_header("default", ""))

# Appends `count` entries one by one, after the parent says go, so both processes overlap.
APPEND_SCRIPT = """
import asyncio, sys, time
from pathlib import Path
from backend.memory.entries import NewEntry
from backend.memory.file_store import FileMemoryStore

path, tag, count = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
store = FileMemoryStore(path, path.parent / "data")
(path.parent / f"ready-{tag}").touch()
while not (path.parent / "go").exists():
    time.sleep(0.005)

async def main() -> None:
    for i in range(count):
        entry = NewEntry("manual", f"{tag} fact {i}")
        await store.append(tenant_id="default", scope_key="", entries=[entry])
        await asyncio.sleep(0.001)  # as a real writer would, and it lets the other one in

asyncio.run(main())
"""

# Tries one append with the file size limit at `limit` bytes: a real "file too large" error.
FULL_DISK_SCRIPT = """
import asyncio, resource, signal, sys
from pathlib import Path
from backend.memory.base import MemoryWriteFailed
from backend.memory.entries import NewEntry
from backend.memory.file_store import FileMemoryStore

path, limit = Path(sys.argv[1]), int(sys.argv[2])
store = FileMemoryStore(path, path.parent / "data")
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # report EFBIG instead of killing the process
resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))

async def main() -> None:
    try:
        entry = NewEntry("manual", "x" * 300)
        await store.append(tenant_id="default", scope_key="", entries=[entry])
    except MemoryWriteFailed as exc:
        print(exc.code, exc.__cause__.errno)
    else:
        print("written")

asyncio.run(main())
"""


@pytest.fixture
def store(tmp_path: Path) -> FileMemoryStore:
    return FileMemoryStore(tmp_path / "MEMORY.md", tmp_path / "data")


def fact(content: str) -> NewEntry:
    return NewEntry("manual", content, DAY)


def run_python(script: str, *args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen(
        [sys.executable, "-c", script, *args],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def leftover_temp_files(directory: Path) -> list[str]:
    return [name for name in os.listdir(directory) if name.endswith(".tmp")]


async def test_default_tenant_uses_the_NEW_MEMORY_FILE_file_and_its_header(
    store: FileMemoryStore, tmp_path: Path
) -> None:
    await store.append(tenant_id="default", scope_key="", entries=[fact("hello")])

    assert store.path_for(tenant_id="default", scope_key="") == (tmp_path / "MEMORY.md").resolve()
    assert (tmp_path / "MEMORY.md").read_text(
        encoding="utf-8"
    ) == NEW_MEMORY_FILE + "2024-05-17|manual|hello\n"
    assert not (tmp_path / "data" / "memory").exists()


async def test_other_scopes_live_under_the_data_dir_by_id_and_hash(
    store: FileMemoryStore, tmp_path: Path
) -> None:
    scope_key = "telegram:../../etc/passwd"
    await store.append(tenant_id="acme", scope_key="", entries=[fact("tenant-wide")])
    await store.append(tenant_id="acme", scope_key=scope_key, entries=[fact("one user")])

    hashed = hashlib.sha256(scope_key.encode()).hexdigest()
    tenant_dir = tmp_path / "data" / "memory" / "acme"
    assert sorted(p.name for p in tenant_dir.glob("*.md")) == ["tenant.md", f"user-{hashed}.md"]
    assert "one user" in (tenant_dir / f"user-{hashed}.md").read_text(encoding="utf-8")
    assert (
        store.path_for(tenant_id="default", scope_key="u").parent
        == tmp_path / "data" / "memory" / "default"
    )


@pytest.mark.parametrize("tenant_id", ["../x", "..", "a/../../b", "/abs", "x" * 65])
async def test_tenant_id_that_is_not_a_slug_is_rejected(
    store: FileMemoryStore, tmp_path: Path, tenant_id: str
) -> None:
    with pytest.raises(InvalidInput):
        await store.append(tenant_id=tenant_id, scope_key="", entries=[fact("escape")])

    assert os.listdir(tmp_path) == []


@pytest.mark.process
async def test_two_processes_appending_lose_nothing(tmp_path: Path) -> None:
    path = tmp_path / "MEMORY.md"
    workers = [run_python(APPEND_SCRIPT, str(path), tag, "200") for tag in ("alpha", "beta")]
    await until(
        lambda: all((tmp_path / f"ready-{tag}").exists() for tag in ("alpha", "beta")),
        "both workers started",
        poll_s=0.01,
    )
    (tmp_path / "go").touch()
    for worker in workers:
        _, stderr = worker.communicate(timeout=120)
        assert worker.returncode == 0, stderr

    document = await FileMemoryStore(path, tmp_path / "data").read(
        tenant_id="default", scope_key=""
    )

    assert path.read_text(encoding="utf-8").startswith(NEW_MEMORY_FILE)
    assert document.invalid_lines == ()
    assert sorted(entry.content for entry in document.entries) == sorted(
        f"{tag} fact {i}" for tag in ("alpha", "beta") for i in range(200)
    )
    # Each process's own entries stay in the order it wrote them, and the two did overlap.
    writers = [entry.content.split()[0] for entry in document.entries]
    alpha = [e.content for e in document.entries if e.content.startswith("alpha")]
    assert alpha == [f"alpha fact {i}" for i in range(200)]
    assert sum(1 for a, b in itertools.pairwise(writers) if a != b) >= 2
    assert leftover_temp_files(tmp_path) == []


@pytest.mark.process
async def test_full_disk_leaves_the_file_byte_identical(
    store: FileMemoryStore, tmp_path: Path
) -> None:
    await store.append(
        tenant_id="default", scope_key="", entries=[fact(f"n{i}") for i in range(50)]
    )
    path = tmp_path / "MEMORY.md"
    before = path.read_bytes()

    worker = run_python(FULL_DISK_SCRIPT, str(path), str(len(before)))
    stdout, stderr = worker.communicate(timeout=60)

    assert worker.returncode == 0, stderr
    assert stdout.split() == ["memory_write_failed", str(errno.EFBIG)]
    assert path.read_bytes() == before
    assert leftover_temp_files(tmp_path) == []
    document = await store.read(tenant_id="default", scope_key="")
    assert len(document.entries) == 50


@pytest.mark.skipif(
    hasattr(os, "geteuid") and os.geteuid() == 0,
    reason="root ignores directory permissions; the full-disk test covers failed writes",
)
async def test_read_only_directory_leaves_the_file_byte_identical(
    store: FileMemoryStore, tmp_path: Path
) -> None:
    await store.append(tenant_id="acme", scope_key="", entries=[fact("kept")])
    path = store.path_for(tenant_id="acme", scope_key="")
    before = path.read_bytes()
    path.parent.chmod(0o555)
    try:
        with pytest.raises(MemoryWriteFailed):
            await store.append(tenant_id="acme", scope_key="", entries=[fact("lost")])
    finally:
        path.parent.chmod(0o755)

    assert path.read_bytes() == before
    assert leftover_temp_files(path.parent) == []


async def test_write_waits_for_the_lock_then_fails_cleanly(tmp_path: Path) -> None:
    store = FileMemoryStore(tmp_path / "MEMORY.md", tmp_path / "data", lock_timeout_s=0.2)
    await store.append(tenant_id="default", scope_key="", entries=[fact("kept")])
    before = (tmp_path / "MEMORY.md").read_bytes()
    holder = FileLock(f"{tmp_path / 'MEMORY.md'}.lock")

    holder.acquire()  # as another process would hold it
    try:
        with pytest.raises(MemoryWriteFailed):
            await store.append(tenant_id="default", scope_key="", entries=[fact("late")])
    finally:
        holder.release()

    assert (tmp_path / "MEMORY.md").read_bytes() == before


async def test_invalid_lines_survive_a_rewrite(store: FileMemoryStore, tmp_path: Path) -> None:
    path = tmp_path / "MEMORY.md"
    path.write_text(
        "# my memory\n2024-01-01|manual|first\nsomebody typed this\n# note\n"
        "2024-01-02|manual|second\n2024-02-30|manual|impossible date\n",
        encoding="utf-8",
    )
    first = (await store.read(tenant_id="default", scope_key="")).entries[0]

    await store.append(tenant_id="default", scope_key="", entries=[fact("third")])
    await store.delete(tenant_id="default", scope_key="", entry_id=first.id)
    document = await store.read(tenant_id="default", scope_key="")

    assert path.read_text(encoding="utf-8") == (
        "# my memory\nsomebody typed this\n# note\n2024-01-02|manual|second\n"
        "2024-02-30|manual|impossible date\n2024-05-17|manual|third\n"
    )
    assert document.invalid_lines == (
        (2, "somebody typed this"),
        (5, "2024-02-30|manual|impossible date"),
    )


async def test_undecodable_bytes_survive_a_rewrite(store: FileMemoryStore, tmp_path: Path) -> None:
    path = tmp_path / "MEMORY.md"
    path.write_bytes(b"# h\n2024-01-01|manual|caf\xe9 latin-1\n2024-01-01|manual|ok\n")

    await store.append(tenant_id="default", scope_key="", entries=[fact("new")])
    document = await store.read(tenant_id="default", scope_key="")

    assert path.read_bytes() == (
        b"# h\n2024-01-01|manual|caf\xe9 latin-1\n2024-01-01|manual|ok\n2024-05-17|manual|new\n"
    )
    assert document.invalid_lines == ((2, "2024-01-01|manual|caf\ufffd latin-1"),)
    assert "\ufffd" in document.content
    assert [entry.content for entry in document.entries] == ["ok", "new"]


async def test_unchanged_file_is_not_parsed_again(store: FileMemoryStore, tmp_path: Path) -> None:
    await store.append(
        tenant_id="default", scope_key="", entries=[fact(f"n{i}") for i in range(10_000)]
    )

    first = await store.read(tenant_id="default", scope_key="")
    second = await store.read(tenant_id="default", scope_key="")

    assert second is first
    assert len(first.entries) == 10_000


async def test_a_hand_edit_is_seen_by_the_next_read(store: FileMemoryStore, tmp_path: Path) -> None:
    await store.append(tenant_id="default", scope_key="", entries=[fact("one")])
    await store.read(tenant_id="default", scope_key="")

    with (tmp_path / "MEMORY.md").open("a", encoding="utf-8") as file:  # in place, same inode
        file.write("2024-05-18|manual|two\n")
    document = await store.read(tenant_id="default", scope_key="")

    assert [entry.content for entry in document.entries] == ["one", "two"]


async def test_file_mode_is_kept_and_new_files_are_private(
    store: FileMemoryStore, tmp_path: Path
) -> None:
    path = tmp_path / "MEMORY.md"
    path.write_text("# shared\n", encoding="utf-8")
    path.chmod(0o644)

    await store.append(tenant_id="default", scope_key="", entries=[fact("x")])
    await store.append(tenant_id="acme", scope_key="", entries=[fact("y")])

    assert stat.S_IMODE(path.stat().st_mode) == 0o644
    tenant_file = store.path_for(tenant_id="acme", scope_key="")
    assert stat.S_IMODE(tenant_file.stat().st_mode) == 0o600


async def test_reads_never_see_a_half_written_file(store: FileMemoryStore, tmp_path: Path) -> None:
    path = tmp_path / "MEMORY.md"
    await store.append(
        tenant_id="default", scope_key="", entries=[fact(f"n{i}") for i in range(2000)]
    )
    torn: list[int] = []
    done = threading.Event()

    def read_repeatedly() -> None:
        while not done.is_set():
            text = path.read_text(encoding="utf-8")
            if not text.endswith("\n"):
                torn.append(len(text))

    reader = threading.Thread(target=read_repeatedly)
    reader.start()
    try:
        for i in range(20):
            await store.append(tenant_id="default", scope_key="", entries=[fact(f"more {i}")])
    finally:
        done.set()
        reader.join()

    assert torn == []


async def test_the_first_start_creates_the_default_memory_file_with_its_header(
    tmp_path: Path,
) -> None:
    store = FileMemoryStore(tmp_path / "MEMORY.md", tmp_path / "data")

    assert await store.create_default_file() is True
    assert (tmp_path / "MEMORY.md").read_text(encoding="utf-8") == NEW_MEMORY_FILE
    assert stat.S_IMODE((tmp_path / "MEMORY.md").stat().st_mode) == 0o600


async def test_an_existing_memory_file_is_never_rewritten_at_start(tmp_path: Path) -> None:
    (tmp_path / "MEMORY.md").write_text("# mine\n2024-05-17|manual|kept\n", encoding="utf-8")
    store = FileMemoryStore(tmp_path / "MEMORY.md", tmp_path / "data")

    assert await store.create_default_file() is False
    assert (tmp_path / "MEMORY.md").read_text(
        encoding="utf-8"
    ) == "# mine\n2024-05-17|manual|kept\n"
