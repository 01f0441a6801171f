"""Distill again the ranges kept as raw lines (`auto-raw`, written when every summary attempt
failed): each raw line is reverted and its range summarized again with the configured
summarizer. `tally memory resummarize` and the console's operation both run this."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from backend.chat.revert import revert_line
from backend.composition.services import Services
from backend.errors import TallyError

RAW_WRITER = "auto-raw"

# (ranges handed to the summarizer so far, raw lines found): progress, as it goes.
Progress = Callable[[int, int], Awaitable[None]]


@dataclass(slots=True)
class Resummarized:
    found: int = 0  # raw lines at the start
    still_raw: int = 0  # after the summarizer ran
    failures: list[str] = field(default_factory=list)  # "<line id>: <code>: <why>"

    @property
    def is_complete(self) -> bool:
        return not self.still_raw and not self.failures


async def resummarize(
    services: Services, *, tenant_id: str, scope_key: str, progress: Progress | None = None
) -> Resummarized:
    """Re-summarize the raw lines of one memory (`scope_key`), waiting for the summarizer."""
    document = await services.memory.read(tenant_id=tenant_id, scope_key=scope_key)
    raw = [e for e in document.entries if e.writer == RAW_WRITER]
    outcome = Resummarized(found=len(raw))
    if not raw:
        return outcome
    runtime = await services.runtimes.get(tenant_id)
    for handed, entry in enumerate(raw, start=1):
        try:
            reverted = await revert_line(
                tenant_id=tenant_id,
                scope_key=scope_key,
                entry_id=entry.id,
                memory=services.memory,
                jobs=services.overflow_jobs,
                messages=services.messages,
                sessions=services.sessions,
            )
        except TallyError as exc:
            outcome.failures.append(f"{entry.id}: {exc.code}: {exc.message}")
        else:
            runtime.overflow.resume_session(tenant_id, reverted.session_id)
        if progress is not None:
            await progress(handed, len(raw))
    await services.runtimes.wait_idle()
    after = await services.memory.read(tenant_id=tenant_id, scope_key=scope_key)
    outcome.still_raw = sum(e.writer == RAW_WRITER for e in after.entries)
    return outcome
