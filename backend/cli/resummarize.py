"""`tally memory resummarize`: the ranges kept as raw lines (`auto-raw`, written when every
summary attempt failed) are distilled again with the configured summarizer, each raw line
replaced by the summarizer's. It runs the jobs in this process, so with SQLite (one process per
database) run it while the server is stopped; with PostgreSQL, at any time."""

from __future__ import annotations

from backend.composition.build import build_services
from backend.domain.wording import count
from backend.operations.resummarize import resummarize
from backend.settings import Settings


async def run_resummarize(settings: Settings, *, tenant_id: str, user: str) -> int:
    async with build_services(settings) as services:

        async def say_started(handed: int, found: int) -> None:
            if handed == found:
                print(f"summarizing {count(found, 'range')} again…", flush=True)

        outcome = await resummarize(
            services, tenant_id=tenant_id, scope_key=user, progress=say_started
        )
        if not outcome.found:
            print("no raw lines: every range is summarized")
            return 0
        for failure in outcome.failures:
            print(failure)
        done = outcome.found - outcome.still_raw
        print(f"re-summarized {done} of {outcome.found}; {outcome.still_raw} still raw")
        return 0 if outcome.is_complete else 1
