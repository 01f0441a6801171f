"""`tally memory show | search | edit`: the tenant's MEMORY.md from the terminal."""

from __future__ import annotations

import asyncio
import os
import shlex
import subprocess
import tempfile
from pathlib import Path

from backend.composition.runtimes import build_memory_store
from backend.memory.entries import format_line
from backend.settings import Settings
from backend.storage.database import open_database
from backend.storage.migrate import migrate


async def run_memory_command(
    settings: Settings, *, action: str, tenant_id: str, user: str, query: str
) -> int:
    database = open_database(settings.database)
    try:
        await migrate(database)
        store = build_memory_store(settings, database)
        if action == "show":
            document = await store.read(tenant_id=tenant_id, scope_key=user)
            print(document.content, end="")
            for number, line in document.invalid_lines:
                print(f"# line {number} is not an entry (kept as is): {line}")
        elif action == "search":
            for entry in await store.search(
                tenant_id=tenant_id, scope_key=user, query=query, limit=50
            ):
                print(f"{entry.id}  {format_line(entry.date, entry.source_kind, entry.content)}")
        else:
            document = await store.read(tenant_id=tenant_id, scope_key=user)
            edited = await asyncio.to_thread(_edit, document.content)
            if edited is None or edited == document.content:
                print("no change")
                return 0
            saved = await store.replace(tenant_id=tenant_id, scope_key=user, content=edited)
            print(f"saved: {len(saved.entries)} entries, {len(saved.invalid_lines)} kept as is")
        return 0
    finally:
        await database.dispose()


def _edit(content: str) -> str | None:
    """Open `content` in $VISUAL or $EDITOR; the edited text, or None if the editor failed."""
    editor = os.environ.get("VISUAL") or os.environ.get("EDITOR") or "vi"
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "MEMORY.md"
        path.write_text(content, encoding="utf-8")
        if subprocess.run([*shlex.split(editor), str(path)], check=False).returncode != 0:
            return None
        return path.read_text(encoding="utf-8")
