"""`tally memory resummarize`: the ranges kept as raw lines (`auto-raw`, written when every
summary attempt failed) are distilled again with the configured summarizer, each raw line
replaced by the summarizer's. It runs the jobs in this process, so with SQLite (one process per
database) run it while the server is stopped; with PostgreSQL, at any time."""

from __future__ import annotations

from backend.chat.revert import revert_line
from backend.composition import build_services
from backend.errors import TallyError
from backend.settings import Settings

RAW_SOURCE = "auto-raw"


async def run_resummarize(settings: Settings, *, tenant_id: str, user: str) -> int:
    async with build_services(settings) as services:
        document = await services.memory.read(tenant_id=tenant_id, scope_key=user)
        raw = [e for e in document.entries if e.writer == RAW_SOURCE]
        if not raw:
            print("no raw lines: every range is summarized")
            return 0
        runtime = await services.runtimes.get(tenant_id)
        failed = 0
        for entry in raw:
            try:
                reverted = await revert_line(
                    tenant_id=tenant_id,
                    scope_key=user,
                    entry_id=entry.id,
                    memory=services.memory,
                    jobs=services.overflow_jobs,
                    messages=services.messages,
                    sessions=services.sessions,
                )
            except TallyError as exc:
                print(f"{entry.id}: {exc.code}: {exc.message}")
                failed += 1
                continue
            runtime.overflow.resume_session(tenant_id, reverted.session_id)
        print(f"summarizing {len(raw) - failed} range(s) again…", flush=True)
        await services.runtimes.wait_idle()
        after = await services.memory.read(tenant_id=tenant_id, scope_key=user)
        still_raw = sum(e.writer == RAW_SOURCE for e in after.entries)
        print(f"re-summarized {len(raw) - still_raw} of {len(raw)}; {still_raw} still raw")
        return 1 if still_raw or failed else 0
