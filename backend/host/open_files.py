"""The open-file limit: each SSE stream holds a client socket and a model connection, so the
common soft default of 1,024 refuses connections, database files and MEMORY.md reads at about
500 streams at once. The soft limit is raised to the hard one at start; beyond that is the
operator's (`ulimit -Hn`, `LimitNOFILE=` in a systemd unit)."""

from __future__ import annotations

import resource

UNLIMITED_SOFT = 65_536  # what to take when the hard limit is unlimited


def raise_open_files_limit() -> int:
    """Raise this process's soft open-file limit to the hard one; the limit now in force
    (inherited by the processes it starts)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = max(soft, UNLIMITED_SOFT) if hard == resource.RLIM_INFINITY else hard
    if soft < wanted:
        resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
    return max(soft, wanted)
