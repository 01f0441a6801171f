"""SQLite on a disk that fills up or turns read-only in the middle of the work (issue 30;
docs/operations.md, reliability E): during a turn (the user's message stored, the model writing its
reply) and during a summary (the summarizer's answer on its way to the journal).

The database and MEMORY.md live on a small tmpfs of the test's own, filled to the last byte or
remounted read-only (root only: skipped elsewhere). A turn whose reply cannot be stored ends
with a clear `storage_unavailable` (the terminal SSE event, or a 503), the user's message is
kept once and no reply is faked; a summary that cannot be journaled is retried and finishes
once the disk is back; afterwards the next turn works and every invariant holds.
"""

from __future__ import annotations

import asyncio
import subprocess
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from backend.app import create_app
from backend.domain.events import ProviderEvent
from backend.domain.requests import ChatRequest
from backend.providers.scripted import ScriptedProvider
from tests.chat.test_overflow_leases import GatedSummarizer, jobs_of, three_turns
from tests.conftest import fill, make_settings, serve
from tests.invariants import check_invariants
from tests.sse import read_events
from tests.waiting import until

FIGURE = {"tried": 0, "survived": 0, "lost": 0}


@pytest.fixture(scope="module", autouse=True)
def figure() -> Iterator[None]:
    yield
    print(
        f"\nsqlite disk faults: {FIGURE['tried']} tried, {FIGURE['survived']} survived, "
        f"{FIGURE['lost']} lost"
    )


class Disk:
    """Where the database and MEMORY.md live, and how it fails and is repaired: `full` is a
    small tmpfs filled to the last byte (repaired by deleting the filler); `read_only` an ext4
    image mounted `errors=remount-ro` whose kernel is told of a file system error, so it turns
    read-only at once, files open for writing included, as a failing disk does (repaired as an
    operator would: unmounted, checked with e2fsck, mounted again)."""

    def __init__(self, kind: str, path: Path, image: Path | None = None) -> None:
        self.kind = kind
        self.path = path
        self._image = image
        self._filler: Path | None = None

    def fail(self) -> None:
        if self.kind == "full":
            self._filler = fill(self.path)
            return
        device = Path(_run("findmnt", "-no", "SOURCE", str(self.path)).strip()).name
        Path(f"/sys/fs/ext4/{device}/trigger_fs_error").write_text("tally test: disk failed")

    def repair(self) -> None:
        """After the server stopped (a read-only file system is not made writable under it)."""
        if self._filler is not None:
            self._filler.unlink()
            self._filler = None
        if self.kind == "read_only":
            assert self._image is not None
            _run("umount", str(self.path))
            subprocess.run(["e2fsck", "-fy", str(self._image)], capture_output=True)
            _mount_ext4(self._image, self.path)


def _run(*command: str) -> str:
    return subprocess.run(command, capture_output=True, text=True, check=True).stdout


def _mount_ext4(image: Path, path: Path) -> None:
    _run("mount", "-o", "loop,errors=remount-ro", str(image), str(path))


@pytest.fixture(params=["full", "read_only"])
def disk(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Disk]:
    if request.param == "full":
        yield Disk("full", request.getfixturevalue("small_disk"))
        return
    image, path = tmp_path / "disk.img", tmp_path / "ext4"
    path.mkdir()
    subprocess.run(["truncate", "-s", "32M", str(image)], check=True)
    made = subprocess.run(["mkfs.ext4", "-q", "-F", str(image)], capture_output=True)
    mounted = made.returncode == 0 and subprocess.run(
        ["mount", "-o", "loop,errors=remount-ro", str(image), str(path)], capture_output=True
    )
    if not mounted or mounted.returncode != 0:
        pytest.skip("a read-only disk needs an ext4 image on a loop device (root)")
    try:
        yield Disk("read_only", path, image)
    finally:
        subprocess.run(["umount", "-l", str(path)], capture_output=True)


@dataclass
class GatedModel(ScriptedProvider):
    """A model that says its first words, then waits for `gate` before the rest of its reply;
    `writing` is set once the first words went out."""

    gate: asyncio.Event = field(default_factory=asyncio.Event)
    writing: asyncio.Event = field(default_factory=asyncio.Event)

    async def stream(self, request: ChatRequest) -> AsyncIterator[ProviderEvent]:
        first = True
        async for event in super().stream(request):
            yield event
            if first and not self.gate.is_set():
                first = False
                self.writing.set()
                await self.gate.wait()


def disk_settings(disk: Path, tmp_path: Path, **sections: Any) -> Any:
    memory = {"path": str(disk / "MEMORY.md"), "retry_base_s": 0.05}
    memory |= sections.pop("memory", {})
    return make_settings(
        f"sqlite+aiosqlite:///{disk / 'tally.db'}", tmp_path, memory=memory, **sections
    )


async def stored(client: httpx.AsyncClient, session_id: str) -> list[tuple[str, str]]:
    page = await client.get(f"/api/chat/sessions/{session_id}/messages")
    assert page.status_code == 200, page.text
    return [(m["role"], m["content"]) for m in page.json()["messages"]]


async def failing_turn(
    client: httpx.AsyncClient, body: dict[str, Any], model: GatedModel, disk: Disk, stream: bool
) -> tuple[int, str]:
    """A turn during which the disk fails, after its message was stored and while the model
    writes; (HTTP status, the error code it ended with)."""
    if stream:
        async with client.stream("POST", "/api/chat/send", json={**body, "stream": True}) as r:
            events = []
            async for name, data in read_events(r):
                events.append((name, data))
                if name == "text.delta" and not model.gate.is_set():
                    try:
                        disk.fail()
                    finally:
                        model.gate.set()
        names = [name for name, _ in events]
        assert names.count("error") + names.count("turn.completed") == 1, names
        return r.status_code, events[-1][1].get("code", events[-1][0])
    answer = asyncio.create_task(client.post("/api/chat/send", json=body))
    await asyncio.wait_for(model.writing.wait(), 60)
    try:
        disk.fail()
    finally:
        model.gate.set()
    response = await answer
    return response.status_code, response.json().get("error", {}).get("code", "")


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
async def test_a_disk_that_fails_during_a_turn_ends_it_clearly_and_loses_nothing_stored(
    disk: Disk, tmp_path: Path, stream: bool
) -> None:
    model = GatedModel(replies=["the whole reply, which cannot be stored"])
    model.gate.set()
    settings = disk_settings(disk.path, tmp_path)
    async with serve(create_app(settings, provider=model)) as client:
        session_id = (await client.post("/api/chat/sessions", json={})).json()["id"]
        before = {"session_id": session_id, "message": "before"}
        assert (await client.post("/api/chat/send", json=before)).status_code == 200
        model.gate.clear()
        body = {"session_id": session_id, "message": "x" * 90_000}  # more than a page holds
        status, code = await failing_turn(client, body, model, disk, stream)
        health = await client.get("/api/health")
        refused = await client.post("/api/chat/send", json={**before, "message": "while down"})
    disk.repair()  # the server stopped with the disk still failed: nothing hung
    async with serve(create_app(settings, provider=model)) as client:
        after = await client.post("/api/chat/send", json={**before, "message": "after"})
        messages = await stored(client, session_id)

    check_invariants(disk.path / "tally.db", disk.path / "MEMORY.md")
    users = [text for role, text in messages if role == "user"]
    FIGURE["tried"] += 1
    FIGURE["lost"] += sum(text not in users for text in ("before", "after"))
    FIGURE["survived"] += code == "storage_unavailable" and after.status_code == 200
    assert code == "storage_unavailable"
    assert status == (200 if stream else 503)  # a stream had begun: its terminal event says so
    assert health.json()["database"] == "unavailable"
    assert refused.status_code == 503 and refused.json()["error"]["code"] == "storage_unavailable"
    assert after.status_code == 200, after.text
    assert users.count("before") == 1 and users.count("after") == 1 and "while down" not in users
    assert users.count("x" * 90_000) <= 1  # kept once, if the disk took it before failing
    assert len([m for m in messages if m[0] == "assistant"]) == 2  # none faked for the failed turn


@pytest.mark.slow
async def test_a_disk_that_fails_during_a_summary_delays_it_and_it_finishes_once(
    disk: Disk, tmp_path: Path
) -> None:
    summarizer = GatedSummarizer()
    settings = disk_settings(
        disk.path, tmp_path, persona={"max_history_messages": 4}, memory={"overflow_batch": 2}
    )
    chat = ScriptedProvider(replies=["ok"])
    app = create_app(settings, provider=chat, summarizer_provider=summarizer)
    async with serve(app) as client:
        database = app.state.services.database
        session_id = await three_turns(client)
        await until(summarizer.asked.is_set, "the summarizer being asked")
        try:
            disk.fail()
        finally:
            summarizer.gate.set()  # its answer cannot be journaled now
        await until(lambda: database.write_fault is not None, "the failed write")
    disk.repair()
    app = create_app(settings, provider=chat, summarizer_provider=summarizer)
    async with serve(app) as client:
        await app.state.services.runtimes.wait_idle()  # the journal resumes it at start
        (job,) = await jobs_of(app)
        body = {"session_id": session_id, "message": "and now"}
        after = await client.post("/api/chat/send", json=body)
        await app.state.services.runtimes.wait_idle()

    check_invariants(disk.path / "tally.db", disk.path / "MEMORY.md")
    memory = (disk.path / "MEMORY.md").read_text(encoding="utf-8")
    FIGURE["tried"] += 1
    FIGURE["survived"] += job.status == "done"
    FIGURE["lost"] += job.status != "done"
    assert job.status == "done"
    assert memory.count("user said: fact number 0; user said: fact number 1") == 1
    assert after.status_code == 200, after.text
