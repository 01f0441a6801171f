"""One log line a summary job: when it is done, and each time it fails and waits to retry.

Ids and figures only; a failure's message is Tally's own (a provider failure names the
provider, its URL and the cause), never the summarized text.
"""

from __future__ import annotations

import logging

from backend.errors import TallyError
from backend.storage.overflow_jobs import OverflowJob

log = logging.getLogger("tally.summaries")


def job_fields(job: OverflowJob) -> dict[str, object]:
    return {
        "tenant": job.tenant_id,
        "session": job.session_id,
        "job": job.id,
        "kind": job.kind,
        "messages": f"{job.first_message_id}-{job.last_message_id}",
    }


def log_job_done(job: OverflowJob) -> None:
    extra = job_fields(job) | {
        "memory_line": bool(job.memory_line),
        "failed_attempts": job.attempts,
    }
    log.info("summary job done", extra=extra)


def log_job_retry(job: OverflowJob, error: TallyError, *, delay_s: float) -> None:
    log.warning(
        "summary job failed (%s: %s), attempt %s; retry in %.1f s",
        error.code,
        error.message,
        job.attempts + 1,
        delay_s,
        extra=job_fields(job),
    )
