"""The steps of one summarizer job: summarize the range (or take the summary an automatic
write made of it), write its memory line (dated the day its words were said), close it. Each
step is saved before the next, so a job resumed after a crash picks up where it stopped.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, date, datetime

from backend.chat.failpoints import Failpoints
from backend.chat.memory_health import MemoryHealth
from backend.chat.overflow_policy import OverflowPolicy, memory_source
from backend.chat.summarizer import Summarizer, SummaryOutput, raw_output
from backend.chat.summary_log import log_job_done
from backend.domain.messages import StoredMessage, Usage
from backend.memory.base import MemoryEntryNotFound, MemoryStore, MemoryUnavailable
from backend.memory.entries import FACT_SEPARATOR, MemoryEntry, NewEntry, Provenance
from backend.memory.proposals import Confirmation
from backend.metrics.registry import SUMMARIZER_RUNS, TOKENS
from backend.settings.pricing import Charge
from backend.storage.messages import MessageRepository
from backend.storage.overflow_jobs import OverflowJob, OverflowJobRepository
from backend.storage.usage import UsageDay

log = logging.getLogger(__name__)

REPLACEABLE = 50  # current lines searched for facts the summarizer is shown to replace
# (tenant id, the job's scope key, the facts of a line just written): embeds them once.
FactsWritten = Callable[[str, str, Sequence[str]], Awaitable[None]]


class JobSteps:
    def __init__(
        self,
        *,
        jobs: OverflowJobRepository,
        messages: MessageRepository,
        memory: MemoryStore,
        summarizer: Summarizer,
        policy: OverflowPolicy,
        failpoints: Failpoints,
        health: MemoryHealth,
        confirmation: Confirmation | None,
        price: Callable[[Usage], Charge],
        embed_written: FactsWritten | None,
    ) -> None:
        self._jobs = jobs
        self._messages = messages
        self._memory = memory
        self._summarizer = summarizer
        self._policy = policy
        self._failpoints = failpoints
        self._health = health
        self._confirmation = confirmation  # a person's lines proposed to them, not written
        self._price = price  # a summary's estimated cost, at the summarizer model's prices
        self._embed_written = embed_written  # gives facts their vectors as they are written

    async def advance(self, job: OverflowJob) -> None:
        """Walk the job through its remaining steps, each saved before the next."""
        if job.status == "pending":
            messages = await self._messages.between(
                tenant_id=job.tenant_id,
                session_id=job.session_id,
                first_id=job.first_message_id,
                last_id=job.last_message_id,
            )
            if not messages:
                await self._jobs.abandon(job, reason="the messages no longer exist")
                return
            covering = await self._summary_covering(job)
            if covering is not None:
                output = SummaryOutput((), covering, Usage())  # no call: nothing to distill
            elif self.is_spent(job):
                output = raw_output(
                    messages,
                    memory_from_id=job.memory_from_id,
                    previous_summary=job.previous_summary,
                )
                log.warning(
                    "overflow job %s: %s attempts failed; its range is kept as a raw line",
                    job.id,
                    job.attempts,
                    extra={"tenant": job.tenant_id, "session": job.session_id},
                )
                SUMMARIZER_RUNS.labels(job.tenant_id, "raw").inc()
            else:
                output = await self._summarize(job, messages)
            TOKENS.labels(job.tenant_id, "summarizer").inc(
                output.usage.prompt_tokens + output.usage.completion_tokens
            )
            called = covering is None and not self.is_spent(job)
            priced = self._price(output.usage) if output.usage.prompt_tokens else Charge()
            await self._jobs.record_summary(
                job,
                summary=output.summary,
                memory_line=output.memory_text or None,
                usage=UsageDay(
                    job.tenant_id,
                    datetime.now(UTC).date(),
                    summarizer_tokens=output.usage.prompt_tokens + output.usage.completion_tokens,
                    summarizer_calls=1 if called else 0,
                    cost_micros=priced.cost_micros,
                    unpriced_calls=priced.unpriced_calls,
                ),
                supersedes=output.supersedes if output.facts else (),
            )
            self._failpoints.hit("overflow.summarized")
            job = await self._jobs.get(tenant_id=job.tenant_id, job_id=job.id)
        if job.status == "summarized":
            if job.memory_entry_id is not None:  # distilled again after a revert
                with contextlib.suppress(MemoryEntryNotFound):
                    await self._memory.delete(
                        tenant_id=job.tenant_id,
                        scope_key=job.scope_key,
                        entry_id=job.memory_entry_id,
                    )
            entry_id = await self._write_memory(job)
            await self._jobs.record_memory(job, memory_entry_id=entry_id)
            self._failpoints.hit("overflow.memory_written")
        await self._jobs.complete(job, delete_evicted=self._policy.delete_evicted)
        log_job_done(job)
        self._health.summaries_recovered(job.tenant_id, job.session_id)
        self._failpoints.hit("overflow.done")

    async def _summarize(self, job: OverflowJob, messages: list[StoredMessage]) -> SummaryOutput:
        model = self._summarizer.model_for(
            job.attempts, retries_per_model=self._policy.retries_per_model
        )
        output = await self._summarizer.summarize(
            model,
            messages=messages,
            memory_from_id=job.memory_from_id,
            previous_summary=job.previous_summary,
            language=self._policy.language,
            replaceable=await self._replaceable(job, messages),
        )
        is_fallback = self._summarizer.has_fallback and (
            job.attempts >= self._policy.retries_per_model
        )
        SUMMARIZER_RUNS.labels(job.tenant_id, "fallback" if is_fallback else "ok").inc()
        return output

    async def _replaceable(
        self, job: OverflowJob, messages: list[StoredMessage]
    ) -> list[MemoryEntry]:
        """The current lines about what the range's user messages mention: a fact that changed
        replaces its line instead of sitting beside it. Unreadable memory shows none: the
        summary is saved all the same, and its line waits for the memory to come back."""
        said = " ".join(
            m.content for m in messages if m.role == "user" and m.id >= job.memory_from_id
        )
        if not said:
            return []
        try:
            return await self._memory.search(
                tenant_id=job.tenant_id, scope_key=job.scope_key, query=said, limit=REPLACEABLE
            )
        except MemoryUnavailable as exc:
            log.warning("overflow job %s: memory not readable for replacing: %s", job.id, exc)
            return []

    async def _summary_covering(self, job: OverflowJob) -> str | None:
        """For an eviction of messages memory holds already: the summary the automatic write
        made when it distilled them (it covers them), so no call is made only to summarize.
        None when the range has something new for memory, or no summary covers it."""
        if job.kind != "overflow" or job.memory_from_id <= job.last_message_id:
            return None
        return await self._jobs.summary_covering(
            tenant_id=job.tenant_id,
            session_id=job.session_id,
            last_message_id=job.last_message_id,
        )

    def is_spent(self, job: OverflowJob) -> bool:
        return job.attempts >= self._policy.max_attempts

    async def _write_memory(self, job: OverflowJob) -> str | None:
        if not job.memory_line:
            return None  # "nothing to record": the range leaves with no memory line
        line = NewEntry(
            source=memory_source(job, is_raw=self.is_spent(job)),
            content=job.memory_line,
            date=await self._said_on(job),
            provenance=Provenance(job.session_id, job.memory_from_id, job.last_message_id),
            supersedes=job.memory_supersedes,
        )
        if self._confirmation is not None and job.scope_key:
            # The range is distilled once either way: the job ends here, its line waits for
            # the person's answer (proposed once per job, also when this step is retried).
            await self._confirmation.propose(
                tenant_id=job.tenant_id,
                user_key=job.scope_key,
                session_id=job.session_id,
                entry=line,
                job_id=job.id,
            )
            return None
        entry = await self._memory.append_once(
            tenant_id=job.tenant_id, scope_key=job.scope_key, entry=line
        )
        await self._written(job, entry)
        return entry.id

    async def _written(self, job: OverflowJob, entry: MemoryEntry) -> None:
        if self._embed_written is not None:
            facts = entry.content.split(FACT_SEPARATOR)
            await self._embed_written(job.tenant_id, job.scope_key, facts)

    async def _said_on(self, job: OverflowJob) -> date | None:
        """The day the range's last message was said: the date its facts carry (None, for
        today, when the messages are gone)."""
        last = await self._messages.between(
            tenant_id=job.tenant_id,
            session_id=job.session_id,
            first_id=job.last_message_id,
            last_id=job.last_message_id,
        )
        return last[0].created_at.date() if last else None
