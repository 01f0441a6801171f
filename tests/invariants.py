"""The invariant checker every fault test ends with (docs/operations.md, reliability).

`check_invariants(db_path, memory_path)` reads a stopped (or idle) server's SQLite file with the
`sqlite3` module and its MEMORY.md files, and fails with every broken invariant listed:

- the database passes `PRAGMA integrity_check` and `PRAGMA foreign_key_check`;
- messages: unique ids, role user/assistant, status complete/incomplete, each in its session's
  tenant; no two user messages share a turn; a complete reply has its user message (same
  turn) and a turn has at most one complete reply;
- the journal: every overflow job is `done`, or `abandoned` with a reason; a done job moved the
  watermark (and, for an overflow, the window) at least to its range;
- the window: no message left it without a done overflow job whose range holds it;
- memory: every MEMORY.md parses (comments and blank lines apart, no invalid line); no two
  entries distill the same message; every done job that produced a memory line has exactly one
  entry with its provenance, in its own tenant's memory, named by the job's `memory_entry_id`,
  and no job without one has any; every entry with provenance belongs to such a job.

`find_violations` returns the same findings as a list, for tests that count them.
"""

from __future__ import annotations

import sqlite3
from collections import defaultdict
from collections.abc import Iterable
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path

from backend.memory.entries import Provenance, parse_document

DEFAULT_TENANT_ID = "default"  # the tenant whose memory is the top-level MEMORY.md
MESSAGE_ROLES = ("user", "assistant")
MESSAGE_STATUSES = ("complete", "incomplete")
FINISHED_JOB_STATUSES = ("done", "abandoned")


@dataclass(frozen=True)
class MemoryLine:
    """One memory entry that carries provenance, and where it is kept."""

    origin: str  # a file path, or `memory_entries row <id>`
    tenant_id: str
    entry_id: str
    provenance: Provenance

    @property
    def ids(self) -> range:
        return range(self.provenance.first_message_id, self.provenance.last_message_id + 1)

    def __str__(self) -> str:
        return f"{self.provenance.encode()} ({self.origin}, entry {self.entry_id})"


def check_invariants(db_path: Path, memory_path: Path, *, data_dir: Path | None = None) -> None:
    """Fail with every broken invariant. `memory_path` is the default tenant's MEMORY.md;
    with `data_dir`, the other tenants' and users' files under `data_dir/memory/` count too."""
    violations = find_violations(db_path, memory_path, data_dir=data_dir)
    assert not violations, "invariants broken:\n- " + "\n- ".join(violations)


def find_violations(db_path: Path, memory_path: Path, *, data_dir: Path | None = None) -> list[str]:
    """Every broken invariant, one readable line each; empty when all hold."""
    with closing(sqlite3.connect(db_path)) as db:
        db.row_factory = sqlite3.Row
        violations = _database_integrity(db)
        if violations:
            return violations  # the rows below cannot be trusted
        jobs = list(db.execute("SELECT * FROM overflow_jobs ORDER BY id"))
        violations += _messages(db)
        violations += _journal(db, jobs)
        violations += _window(db, jobs)
        lines, parse_violations = _memory_lines(db, memory_path, data_dir)
        violations += parse_violations
        violations += _memory_coverage(db, jobs, lines)
    return violations


def _database_integrity(db: sqlite3.Connection) -> list[str]:
    violations = []
    (result,) = db.execute("PRAGMA integrity_check").fetchone()
    if result != "ok":
        violations.append(f"PRAGMA integrity_check: {result}")
    for row in db.execute("PRAGMA foreign_key_check"):
        violations.append(f"foreign key broken: {tuple(row)}")
    return violations


def _messages(db: sqlite3.Connection) -> list[str]:
    violations = []
    for row in db.execute(
        "SELECT session_id, id, count(*) AS n FROM messages GROUP BY session_id, id HAVING n > 1"
    ):
        violations.append(f"session {row['session_id']}: message id {row['id']} stored twice")
    for row in db.execute(
        "SELECT m.id, m.role, m.status, m.tenant_id, s.tenant_id AS session_tenant"
        " FROM messages m LEFT JOIN sessions s ON s.id = m.session_id"
    ):
        if row["role"] not in MESSAGE_ROLES:
            violations.append(f"message {row['id']}: role {row['role']!r}")
        if row["status"] not in MESSAGE_STATUSES:
            violations.append(f"message {row['id']}: status {row['status']!r}")
        if row["tenant_id"] != row["session_tenant"]:
            violations.append(
                f"message {row['id']}: tenant {row['tenant_id']!r}, its session's"
                f" {row['session_tenant']!r}"
            )
    for row in db.execute(
        "SELECT tenant_id, turn_id, group_concat(id) AS ids FROM messages WHERE role = 'user'"
        " GROUP BY tenant_id, turn_id HAVING count(*) > 1"
    ):
        violations.append(
            f"turn {row['turn_id']}: user message stored more than once ({row['ids']})"
        )
    for row in db.execute(
        "SELECT a.id, a.turn_id FROM messages a WHERE a.role = 'assistant'"
        " AND a.status = 'complete' AND NOT EXISTS (SELECT 1 FROM messages u"
        "  WHERE u.role = 'user' AND u.tenant_id = a.tenant_id AND u.session_id = a.session_id"
        "  AND u.turn_id = a.turn_id AND u.id < a.id)"
    ):
        violations.append(
            f"message {row['id']}: a complete reply without its user message"
            f" (turn {row['turn_id']})"
        )
    for row in db.execute(
        "SELECT tenant_id, turn_id, group_concat(id) AS ids FROM messages"
        " WHERE role = 'assistant' AND status = 'complete'"
        " GROUP BY tenant_id, turn_id HAVING count(*) > 1"
    ):
        violations.append(f"turn {row['turn_id']}: more than one complete reply ({row['ids']})")
    return violations


def _journal(db: sqlite3.Connection, jobs: list[sqlite3.Row]) -> list[str]:
    sessions = {row["id"]: row for row in db.execute("SELECT * FROM sessions")}
    violations = []
    for job in jobs:
        name = f"overflow job {job['id']} ({job['kind']}"
        name += f" {job['first_message_id']}-{job['last_message_id']})"
        if job["status"] not in FINISHED_JOB_STATUSES:
            violations.append(f"{name} is unfinished: {job['status']!r}")
        if job["status"] == "abandoned" and not job["last_error"]:
            violations.append(f"{name} was abandoned without a reason")
        if job["status"] != "done":
            continue
        if job["memory_line"] is not None and job["memory_entry_id"] is None:
            violations.append(f"{name} has a memory line but no memory entry id")
        if job["memory_line"] is None and job["memory_entry_id"] is not None:
            violations.append(f"{name} has a memory entry id but no memory line")
        session = sessions.get(job["session_id"])
        if session is None:
            continue  # the session was deleted; its messages went with it
        if session["tenant_id"] != job["tenant_id"]:
            violations.append(f"{name} is tenant {job['tenant_id']!r}, its session is not")
        if session["memory_watermark_id"] < job["last_message_id"]:
            violations.append(
                f"{name} is done but the memory watermark is {session['memory_watermark_id']}"
            )
        if job["kind"] == "overflow" and session["window_start_id"] < job["next_start_id"]:
            violations.append(
                f"{name} is done but the window starts at {session['window_start_id']},"
                f" not {job['next_start_id']}"
            )
    return violations


def _window(db: sqlite3.Connection, jobs: list[sqlite3.Row]) -> list[str]:
    """Messages leave the window only through a done overflow job (a failed summary evicts
    nothing), so every message below `window_start_id` lies in a done overflow range."""
    done: dict[str, list[range]] = defaultdict(list)
    for job in jobs:
        if job["status"] == "done" and job["kind"] == "overflow":
            done[job["session_id"]].append(
                range(job["first_message_id"], job["last_message_id"] + 1)
            )
    unjournaled: dict[str, list[int]] = defaultdict(list)
    for row in db.execute(
        "SELECT m.session_id, m.id FROM messages m JOIN sessions s ON s.id = m.session_id"
        " WHERE m.id < s.window_start_id ORDER BY m.id"
    ):
        if not any(row["id"] in evicted for evicted in done[row["session_id"]]):
            unjournaled[row["session_id"]].append(row["id"])
    return [
        f"session {session_id}: message(s) {_spans(ids)} left the window without a done"
        " overflow job"
        for session_id, ids in unjournaled.items()
    ]


def _spans(ids: list[int]) -> str:
    """Sorted ids as runs: [1, 2, 3, 7] -> "1-3, 7"."""
    runs: list[list[int]] = []
    for message_id in ids:
        if runs and message_id == runs[-1][-1] + 1:
            runs[-1].append(message_id)
        else:
            runs.append([message_id])
    return ", ".join(str(r[0]) if len(r) == 1 else f"{r[0]}-{r[-1]}" for r in runs)


def _memory_lines(
    db: sqlite3.Connection, memory_path: Path, data_dir: Path | None
) -> tuple[list[MemoryLine], list[str]]:
    """Entries with provenance from every MEMORY.md file and the `memory_entries` table, and
    the parse failures of the files."""
    files = [(memory_path, DEFAULT_TENANT_ID)]
    if data_dir is not None:
        # data_dir/memory/<tenant_id>/tenant.md, or user-<hash>.md with `memory.scope: user`
        files += [(path, path.parent.name) for path in sorted(data_dir.glob("memory/*/*.md"))]
    lines: list[MemoryLine] = []
    violations: list[str] = []
    for path, tenant_id in files:
        if not path.exists():
            continue  # nothing was ever written: an empty memory
        try:
            text = path.read_bytes().decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            violations.append(f"{path}: not UTF-8 ({exc})")
            continue
        document = parse_document(text)
        for number, line in document.invalid_lines:
            violations.append(f"{path}:{number}: does not parse: {line!r}")
        lines += [
            MemoryLine(str(path), tenant_id, entry.id, entry.provenance)
            for entry in document.entries
            if entry.provenance is not None
        ]
    for row in db.execute(
        "SELECT id, tenant_id, session_id, first_message_id, last_message_id FROM memory_entries"
        " WHERE session_id IS NOT NULL"
    ):
        provenance = Provenance(row["session_id"], row["first_message_id"], row["last_message_id"])
        lines.append(
            MemoryLine(
                f"memory_entries row {row['id']}", row["tenant_id"], str(row["id"]), provenance
            )
        )
    return lines, violations


def _memory_coverage(
    db: sqlite3.Connection, jobs: list[sqlite3.Row], lines: list[MemoryLine]
) -> list[str]:
    """Each evicted range that produced a memory line is covered by exactly one entry."""
    tenants = {
        row["id"]: row["tenant_id"] for row in db.execute("SELECT id, tenant_id FROM sessions")
    }
    by_session: dict[str, list[MemoryLine]] = defaultdict(list)
    for line in lines:
        by_session[line.provenance.session_id].append(line)
    violations = []
    for session_id, session_lines in by_session.items():
        violations += _overlaps(session_lines)
        tenant_id = tenants.get(session_id)
        violations += [
            f"memory line {line} is in tenant {line.tenant_id!r}'s memory,"
            f" its session in tenant {tenant_id!r}'s"
            for line in session_lines
            if tenant_id is not None and line.tenant_id != tenant_id
        ]
    journaled = set()
    for job in jobs:
        if job["status"] != "done":
            continue
        if job["memory_line"] is None:
            unrecorded = range(job["memory_from_id"], job["last_message_id"] + 1)
            violations += [
                f"overflow job {job['id']} recorded nothing, yet memory line {line}"
                " covers its range"
                for line in by_session.get(job["session_id"], [])
                if _intersects(line.ids, unrecorded)
            ]
            continue
        expected = Provenance(job["session_id"], job["memory_from_id"], job["last_message_id"])
        journaled.add(expected)
        matching = [
            line for line in by_session.get(job["session_id"], []) if line.provenance == expected
        ]
        if len(matching) != 1:
            violations.append(
                f"overflow job {job['id']}: {len(matching)} memory lines for"
                f" {expected.encode()}, expected exactly one"
            )
        elif matching[0].entry_id != job["memory_entry_id"]:
            violations.append(
                f"overflow job {job['id']} names memory entry {job['memory_entry_id']!r},"
                f" but {matching[0]} holds its range"
            )
    violations += [
        f"memory line {line} belongs to no done overflow job"
        for line in lines
        if line.provenance not in journaled
    ]
    return violations


def _overlaps(lines: Iterable[MemoryLine]) -> list[str]:
    """Pairs of one session's memory lines that distill a message twice."""
    ordered = sorted(lines, key=lambda line: (line.provenance.first_message_id, line.entry_id))
    return [
        f"message(s) {max(a.ids.start, b.ids.start)}-{min(a.ids.stop, b.ids.stop) - 1}"
        f" distilled twice: {a} and {b}"
        for index, a in enumerate(ordered)
        for b in ordered[index + 1 :]
        if _intersects(a.ids, b.ids)
    ]


def _intersects(a: range, b: range) -> bool:
    return max(a.start, b.start) < min(a.stop, b.stop)
