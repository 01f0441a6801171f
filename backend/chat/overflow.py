"""The overflow summarizer as a tracked background job, serialized per session.

After each turn `after_turn` checks (in memory, no I/O) whether the window overflowed or the
automatic memory write is due; if so one drain task per session journals a job and walks it
through its steps (see storage/overflow_jobs.py). A failed summary evicts nothing: the job
waits with backoff and is retried, then with the fallback model; once `max_attempts` failed,
the range is kept as a raw line (`auto-raw`: its identifiers and where it is) so the window moves
on and nothing is silently lost, for `tally memory resummarize` later. The user's turn never
waits.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime, timedelta

from backend.chat.failpoints import Failpoints
from backend.chat.leftovers import holds_something_to_keep, is_short_leftover
from backend.chat.memory_health import MemoryHealth
from backend.chat.overflow_policy import OverflowPolicy, auto_write_range
from backend.chat.overflow_steps import FactsWritten, JobSteps
from backend.chat.summarizer import Summarizer
from backend.chat.summary_log import log_job_retry
from backend.chat.window import WindowRow, plan_eviction
from backend.domain.inbound import origin_of
from backend.domain.messages import MessageShape, Session, Usage
from backend.errors import SessionNotFound, TallyError
from backend.memory.base import MemoryStore
from backend.memory.proposals import Confirmation
from backend.metrics.registry import SUMMARIZER_RUNS
from backend.settings.pricing import Charge
from backend.storage.faults import as_storage_fault
from backend.storage.messages import MessageRepository
from backend.storage.overflow_jobs import JobKind, OverflowJob, OverflowJobRepository

log = logging.getLogger(__name__)


class OverflowWorker:
    def __init__(
        self,
        *,
        jobs: OverflowJobRepository,
        messages: MessageRepository,
        memory: MemoryStore,
        summarizer: Summarizer,
        policy: OverflowPolicy,
        failpoints: Failpoints,
        slots: asyncio.Semaphore,
        health: MemoryHealth | None = None,
        confirmation: Confirmation | None = None,
        price: Callable[[Usage], Charge] = lambda _: Charge(unpriced_calls=1),
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        embed_written: FactsWritten | None = None,
    ) -> None:
        self._jobs = jobs
        self._slots = slots  # shared by every tenant's worker: memory.summarizer_jobs
        self._messages = messages
        self._policy = policy
        self._health = health or MemoryHealth()
        self._sleep = sleep
        self._steps = JobSteps(
            jobs=jobs,
            messages=messages,
            memory=memory,
            summarizer=summarizer,
            policy=policy,
            failpoints=failpoints,
            health=self._health,
            confirmation=confirmation,
            price=price,
            embed_written=embed_written,
        )
        self._drains: dict[tuple[str, str], asyncio.Task[None]] = {}
        # Sessions left or quiet, whose undistilled tail is due: where their turns were said
        # (a chat left with /new no longer names its platform chat).
        self._tails: dict[tuple[str, str], str] = {}
        self._busy: set[tuple[str, str]] = set()  # drains inside a job's steps
        self._is_closed = False

    def after_turn(self, session: Session, window: Sequence[WindowRow]) -> None:
        key = (session.tenant_id, session.id)
        if self._is_closed or key in self._drains:
            return  # a drain is running; it plans again when its job is done
        is_due = plan_eviction(window, self._policy.window) is not None or (
            auto_write_range(window, watermark=session.memory_watermark_id, policy=self._policy)
            is not None
        )
        if is_due:
            self._spawn(key)

    def distill_tail(self, session: Session) -> None:
        """Distill what the session said since memory last took it in (a chat left with
        /new, a session gone quiet): its undistilled whole turns, however few; a short
        leftover with nothing for memory is passed over without a call (chat/leftovers.py)."""
        key = (session.tenant_id, session.id)
        if not self._is_closed:
            self._tails[key] = origin_of(session.channel, session.external_key)
            self._spawn(key)

    def resume_session(self, tenant_id: str, session_id: str) -> None:
        """Pick up a session's unfinished jobs after a restart."""
        self._spawn((tenant_id, session_id))

    async def wait_idle(self) -> None:
        """Until no drain runs (tests and shutdown)."""
        while self._drains:
            await asyncio.gather(*list(self._drains.values()), return_exceptions=True)

    async def aclose(self, *, grace_s: float = 5.0) -> None:
        """Let running jobs finish for `grace_s`, then cancel them (they resume at start)."""
        self._is_closed = True
        busy = [self._drains[key] for key in self._busy if key in self._drains]
        if busy:  # a drain waiting out a backoff is cancelled at once
            await asyncio.wait(busy, timeout=grace_s)
        drains = list(self._drains.values())
        for task in drains:
            task.cancel()
        await asyncio.gather(*drains, return_exceptions=True)

    def _spawn(self, key: tuple[str, str]) -> None:
        if key in self._drains:
            return
        task = asyncio.create_task(self._drain(*key), name=f"overflow {key[1]}")
        self._drains[key] = task
        task.add_done_callback(lambda _: self._drains.pop(key, None))

    async def _drain(self, tenant_id: str, session_id: str) -> None:
        faults = 0  # storage faults in a row: the database cannot even record a failure
        try:
            while True:
                try:
                    jobs = await self._jobs.active(tenant_id=tenant_id, session_id=session_id)
                    job = jobs[0] if jobs else await self._plan(tenant_id, session_id)
                    if job is None:
                        self._tails.pop((tenant_id, session_id), None)
                        return
                    if not await self._run_when_due(job):
                        # Another worker holds the job: it plans the session's next one when
                        # done, and a dead worker's job is swept up once its lease runs out.
                        return
                    faults = 0
                except Exception as exc:
                    fault = as_storage_fault(exc)
                    if fault is None:
                        raise
                    faults += 1
                    await self._wait_out_fault(tenant_id, session_id, fault, faults)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception(
                "overflow drain failed", extra={"tenant": tenant_id, "session": session_id}
            )

    async def _record_failure(self, job: OverflowJob, error: TallyError) -> None:
        """Journal the failed attempt (its backoff, and the lease released), waiting out a
        storage fault that keeps even that from being written; the lease is renewed meanwhile,
        so no other worker takes the job half-way."""
        faults = 0
        while True:
            try:
                await self._retry_later(job, error)
                return
            except Exception as exc:
                fault = as_storage_fault(exc)
                if fault is None:
                    raise
                faults += 1
                await self._wait_out_fault(job.tenant_id, job.session_id, fault, faults)

    async def _wait_out_fault(
        self, tenant_id: str, session_id: str, fault: TallyError, faults: int
    ) -> None:
        """Back off as after a failed summary, before trying the database again."""
        delay = min(self._policy.retry_base_s * 2 ** (faults - 1), self._policy.retry_max_s)
        log.warning(
            "overflow: storage fault (%s); retry in %.1f s",
            fault.message,
            delay,
            extra={"tenant": tenant_id, "session": session_id},
        )
        await self._sleep(delay * (0.5 + random.random()))

    async def _plan(self, tenant_id: str, session_id: str) -> OverflowJob | None:
        """Journal the job the session's window calls for now, if any."""
        try:
            session, window = await self._messages.session_with_shape(
                tenant_id=tenant_id, session_id=session_id
            )
        except SessionNotFound:
            return None
        tail_origin = self._tails.get((tenant_id, session_id))
        due = self._due_range(session, window, is_tail=tail_origin is not None)
        if due is None:
            return None
        kind, first, last, next_start = due
        if kind == "auto" and tail_origin is not None:
            if await self._passed_over(session, [m for m in window if first <= m.id <= last]):
                return None
        return await self._jobs.create(
            tenant_id=tenant_id,
            session_id=session_id,
            scope_key=(session.user_key or "") if self._policy.scope_by_user else "",
            kind=kind,
            first_message_id=first,
            last_message_id=last,
            next_start_id=next_start,
            memory_from_id=max(first, session.memory_watermark_id + 1),
            previous_summary=session.summary,
            origin=tail_origin or origin_of(session.channel, session.external_key),
        )

    async def _passed_over(self, session: Session, fresh: list[MessageShape]) -> bool:
        """Move the watermark past a tail's short leftover that holds nothing for memory,
        rather than pay a call to write nothing (chat/leftovers.py); False for any other."""
        if not is_short_leftover(fresh, watermark=session.memory_watermark_id):
            return False
        said = await self._messages.between(
            tenant_id=session.tenant_id,
            session_id=session.id,
            first_id=fresh[0].id,
            last_id=fresh[-1].id,
        )
        if holds_something_to_keep(said):
            return False
        await self._jobs.pass_over(
            tenant_id=session.tenant_id, session_id=session.id, through_id=fresh[-1].id
        )
        log.info(
            "overflow: a leftover of %d messages holds nothing for memory; no call",
            len(fresh),
            extra={"tenant": session.tenant_id, "session": session.id},
        )
        return True

    def _due_range(
        self, session: Session, window: Sequence[WindowRow], *, is_tail: bool
    ) -> tuple[JobKind, int, int, int] | None:
        """(kind, first id, last id, next window start): an eviction first, else the
        automatic memory write (of the tail, however short, for `is_tail`), else nothing."""
        eviction = plan_eviction(window, self._policy.window)
        if eviction is not None:
            return (
                "overflow",
                eviction.first_message_id,
                eviction.last_message_id,
                eviction.next_start_id,
            )
        auto = auto_write_range(
            window, watermark=session.memory_watermark_id, policy=self._policy, is_tail=is_tail
        )
        if auto is None:
            return None
        return "auto", auto[0], auto[1], session.window_start_id

    async def _run_when_due(self, job: OverflowJob) -> bool:
        """Run the job's remaining steps once a slot is free; False while another worker's
        lease holds it."""
        if job.next_attempt_at is not None:
            delay = (job.next_attempt_at - datetime.now(UTC)).total_seconds()
            if delay > 0:
                await self._sleep(delay)
        async with self._slots:  # claimed only once it can run: another worker may take it
            return await self._run(job)

    async def _run(self, job: OverflowJob) -> bool:
        if not await self._jobs.claim(
            tenant_id=job.tenant_id, job_id=job.id, lease_s=self._policy.lease_s
        ):
            return False
        heartbeat = asyncio.create_task(self._renew_lease(job))
        key = (job.tenant_id, job.session_id)
        self._busy.add(key)
        try:
            job = await self._jobs.get(tenant_id=job.tenant_id, job_id=job.id)  # as claimed
            await self._steps.advance(job)
        except Exception as exc:
            error = exc if isinstance(exc, TallyError) else as_storage_fault(exc)
            if error is None:
                raise
            await self._record_failure(job, error)
        finally:
            heartbeat.cancel()
            await asyncio.gather(heartbeat, return_exceptions=True)
            self._busy.discard(key)
        return True

    async def _renew_lease(self, job: OverflowJob) -> None:
        """While this worker runs `job`, keep its lease from expiring; a renewal the database
        refuses is tried again at the next beat (the lease outlives two missed beats)."""
        while True:
            await asyncio.sleep(self._policy.lease_s / 3)  # real time: leases are wall-clock
            try:
                await self._jobs.renew(
                    tenant_id=job.tenant_id, job_id=job.id, lease_s=self._policy.lease_s
                )
            except Exception as exc:
                if as_storage_fault(exc) is None:
                    raise
                log.warning("overflow job %s: lease not renewed: %s", job.id, exc)

    async def _retry_later(self, job: OverflowJob, error: TallyError) -> None:
        SUMMARIZER_RUNS.labels(job.tenant_id, "failed").inc()
        backoff = min(self._policy.retry_base_s * 2**job.attempts, self._policy.retry_max_s)
        delay = backoff * (0.5 + random.random())
        if job.attempts + 1 >= self._policy.max_attempts:
            delay = 0.0  # the last one failed: keep the range as a raw line now
        log_job_retry(job, error, delay_s=delay)
        retry_at = datetime.now(UTC) + timedelta(seconds=delay)
        self._health.summaries_failing(
            job.tenant_id, job.session_id, attempts=job.attempts + 1, error=error.code
        )
        await self._jobs.record_failure(
            job, error=f"{error.code}: {error.message}", retry_at=retry_at
        )
