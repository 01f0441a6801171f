"""The MEMORY.md line format: neutralising, formatting, parsing, rendering (no I/O).

A **line** is one line of the file (`DocumentLine`); an **entry** is a line that parses as
`date|source|content` (`MemoryEntry`; `NewEntry` is one to write), any other is a comment or
an invalid line. The **source** is the whole second field, `kind[@provenance][>supersedes]`:
its **kind** is `writer[/origin]` (`MemoryEntry.source_kind`, and what `NewEntry.source` holds),
the **writer** what wrote it (`manual`, `auto-overflow`; the API shows it as "source"), the
**origin** where what it distils was said (`web`, `telegram:helper:42`), the **provenance** the
messages a summarizer distilled (`<session_id>:<first>-<last>`), and **supersedes** the ids it
replaces (`id`, or `id.n` for its n-th fact). The **content** is the third field, its **facts**
joined by `; `. The invariants every store relies on:

- A formatted entry is exactly one line with exactly two `|`: `neutralise` replaces every line
  break that `str.splitlines` knows (and every other control character) with a space and every
  `|` with `¦`, so no content can forge a second entry or shift a field.
- Other lines are kept verbatim in place; one that does not parse is reported, never dropped.
- A superseded entry or fact stays in the file, unchanged (so every id stays stable), but only
  what is current reaches the model (`MemoryDocument.current_entries`, `current_content`).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property

from backend.domain.tenants import DEFAULT_TENANT
from backend.errors import InvalidInput

MAX_SOURCE_LENGTH = 200  # the `memory_entries.source` column; both stores share the limit

# C0 and C1 controls cover \n \r \v \f \x1c-\x1e \x85; U+2028/2029 are the Unicode separators.
_BREAKS = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]+")
_SURROGATES = re.compile(r"[\ud800-\udfff]")
_ENTRY = re.compile(r"(\d{4}-\d{2}-\d{2})\|([^|]*)\|(.*)", re.DOTALL)
_PROVENANCE = re.compile(
    r"(?P<kind>[^@]+)@(?P<session>[A-Za-z0-9_-]{1,36}):(?P<first>\d{1,18})-(?P<last>\d{1,18})"
)
_SESSION_ID = re.compile(r"[A-Za-z0-9_-]{1,36}")
_REF = r"[0-9a-z-]{1,20}(?:\.\d{1,3})?"  # an entry id, or `id.n`: its n-th fact
_SUPERSEDES = re.compile(rf"(?P<rest>.*)>(?P<ids>{_REF}(?:,{_REF}){{0,4}})")
MAX_SUPERSEDED = 5  # what one entry can replace: the source field has 200 characters
FACT_SEPARATOR = "; "  # how a summarizer's line joins its facts
ORIGIN_SEPARATOR = "/"  # a summarizer's kind, then where its turns were said


def neutralise(text: str) -> str:
    """`text` as one safe line: no line break, no control character, no `|`, no lone surrogate.

    Runs of breaks become one space (so `\\r\\n` is one space), `|` becomes `¦`, and the
    result is stripped. Neutralising twice changes nothing.
    """
    text = _SURROGATES.sub("\ufffd", text)
    return _BREAKS.sub(" ", text).replace("|", "¦").strip()


def format_line(date: dt.date, source: str, content: str) -> str:
    """One entry's line; `source` and `content` are neutralised: it cannot hold a second entry."""
    return f"{date.isoformat()}|{neutralise(source)}|{neutralise(content)}"


@dataclass(frozen=True)
class Provenance:
    """Which messages a summarizer entry distilled: a fixed id range of one session."""

    session_id: str
    first_message_id: int
    last_message_id: int

    def __post_init__(self) -> None:
        # Checked here so that every Provenance encodes into a source that parses back.
        if not _SESSION_ID.fullmatch(self.session_id):
            raise InvalidInput(f"provenance session id {self.session_id!r} is not an id")
        if not 0 <= self.first_message_id <= self.last_message_id < 10**18:
            raise InvalidInput("provenance message ids must form a range first <= last")

    def encode(self) -> str:
        return f"{self.session_id}:{self.first_message_id}-{self.last_message_id}"


def with_origin(writer: str, origin: str | None) -> str:
    """The kind naming the writer and the origin: `auto-overflow/web`."""
    return f"{writer}{ORIGIN_SEPARATOR}{origin}" if origin else writer


def writer_of(kind: str) -> str:
    """The writer of an entry of this kind (`auto-overflow`, `manual`, ...), without its origin."""
    return kind.split(ORIGIN_SEPARATOR, 1)[0]


def origin_of_kind(kind: str) -> str | None:
    """The origin of an entry of this kind, when the kind names one (`auto-overflow/web`)."""
    return kind.partition(ORIGIN_SEPARATOR)[2] or None


def compose_source(kind: str, provenance: Provenance | None, supersedes: Sequence[str] = ()) -> str:
    """The source: the kind, `@<session_id>:<first>-<last>` of its provenance, `>id,id`."""
    source = kind if provenance is None else f"{kind}@{provenance.encode()}"
    return f"{source}>{','.join(supersedes)}" if supersedes else source


def split_supersedes(source: str) -> tuple[str, tuple[str, ...]]:
    """(the source without its supersedes, the superseded ids)."""
    match = _SUPERSEDES.fullmatch(source)
    if match is None:
        return source, ()
    return match["rest"], tuple(match["ids"].split(","))


def split_source(source: str) -> tuple[str, Provenance | None]:
    """(kind, provenance) of a source; a source without valid provenance is all kind."""
    source = split_supersedes(source)[0]
    match = _PROVENANCE.fullmatch(source)
    if match is None or int(match["first"]) > int(match["last"]):
        return source, None
    provenance = Provenance(match["session"], int(match["first"]), int(match["last"]))
    return match["kind"], provenance


@dataclass(frozen=True)
class MemoryEntry:
    """One stored entry. `id` is opaque and stable; `source` is the whole field, provenance
    too. `hidden_facts` are the 1-based numbers of its facts later entries superseded."""

    id: str
    date: dt.date
    source: str
    content: str
    hidden_facts: frozenset[int] = frozenset()

    @property
    def facts(self) -> list[str]:
        return self.content.split(FACT_SEPARATOR)

    @property
    def current_content(self) -> str:
        """What of it is still true: its facts no later entry superseded."""
        if not self.hidden_facts:
            return self.content
        facts = self.facts
        return FACT_SEPARATOR.join(f for n, f in enumerate(facts, 1) if n not in self.hidden_facts)

    @cached_property
    def searchable(self) -> str:
        """`current_content` case-folded, for search: once per parsed document (the stores keep
        those), not once per entry and query."""
        return self.current_content.casefold()

    @cached_property
    def provenance(self) -> Provenance | None:
        return split_source(self.source)[1]

    @cached_property
    def source_kind(self) -> str:
        return split_source(self.source)[0]

    @cached_property
    def writer(self) -> str:
        """Its writer (`auto-overflow`, `manual`, ...), without its origin."""
        return writer_of(self.source_kind)

    @cached_property
    def origin(self) -> str | None:
        """Its origin (`web`, `telegram:helper:42`); None when its kind names none."""
        return origin_of_kind(self.source_kind)

    @cached_property
    def supersedes(self) -> tuple[str, ...]:
        """The ids (`id`, or `id.n` for one fact) this entry supersedes."""
        return split_supersedes(self.source)[1]

    @property
    def line(self) -> str:
        return format_line(self.date, self.source, self.content)


def utc_today() -> dt.date:
    """The date every memory line is written with, whichever store and whoever writes it."""
    return dt.datetime.now(dt.UTC).date()


@dataclass(frozen=True)
class NewEntry:
    """An entry to write. `source` holds its kind (`manual`, `auto-overflow/web`...); `date`
    defaults to today (UTC) when the store writes it."""

    source: str
    content: str
    date: dt.date | None = None
    provenance: Provenance | None = None
    supersedes: tuple[str, ...] = ()  # ids of the entries (or `id.n` facts) it replaces


@dataclass(frozen=True)
class EntryFields:
    """A validated, neutralised NewEntry: what a store writes."""

    date: dt.date
    kind: str
    content: str
    provenance: Provenance | None
    supersedes: tuple[str, ...] = ()

    @property
    def source(self) -> str:
        return compose_source(self.kind, self.provenance, self.supersedes)

    @property
    def line(self) -> str:
        return format_line(self.date, self.source, self.content)


def prepare_entry(entry: NewEntry, *, today: dt.date) -> EntryFields:
    """Neutralise and check a new entry. `@` and `>` are reserved for provenance and
    supersedes, so a kind cannot fake either: they become `＠` and `＞`. Raises InvalidInput
    for an empty or over-long field."""
    kind = neutralise(entry.source).replace("@", "＠").replace(">", "＞")
    supersedes = tuple(dict.fromkeys(entry.supersedes))[:MAX_SUPERSEDED]
    if supersedes and not _SUPERSEDES.fullmatch(">" + ",".join(supersedes)):
        raise InvalidInput("a memory entry can only replace entries named by their ids")
    content = neutralise(entry.content)
    if not kind or len(kind) > MAX_SOURCE_LENGTH:
        raise InvalidInput(f"a memory source must have 1 to {MAX_SOURCE_LENGTH} characters")
    if not content:
        raise InvalidInput("a memory entry needs some content")
    return EntryFields(entry.date or today, kind, content, entry.provenance, supersedes)


@dataclass(frozen=True)
class DocumentLine:
    """One line as stored (`text`, verbatim) and the entry it holds, if it holds one."""

    text: str
    entry: MemoryEntry | None = None

    @property
    def is_comment(self) -> bool:
        """A `#` line or a blank line: header and commentary, kept as is."""
        return self.entry is None and (self.text.startswith("#") or not self.text.strip())

    @property
    def is_invalid(self) -> bool:
        return self.entry is None and not self.is_comment


@dataclass(frozen=True)
class MemoryDocument:
    """A whole MEMORY.md: every line in order, entries and verbatim lines alike."""

    lines: tuple[DocumentLine, ...]

    @cached_property
    def entries(self) -> tuple[MemoryEntry, ...]:
        return tuple(line.entry for line in self.lines if line.entry is not None)

    @cached_property
    def current_entries(self) -> tuple[MemoryEntry, ...]:
        """The entries, less what later ones superseded (a whole entry goes; superseded facts
        are its `hidden_facts`): what the model is told."""
        whole: set[str] = set()
        facts: dict[str, set[int]] = {}
        for entry in self.entries:
            for ref in entry.supersedes:
                entry_id, _, number = ref.partition(".")
                if number:
                    facts.setdefault(entry_id, set()).add(int(number))
                else:
                    whole.add(entry_id)
        current = []
        for entry in self.entries:
            hidden = frozenset(facts.get(entry.id, ()))
            if entry.id in whole or len(hidden & set(range(1, len(entry.facts) + 1))) == len(
                entry.facts
            ):
                continue
            current.append(dataclasses.replace(entry, hidden_facts=hidden) if hidden else entry)
        return tuple(current)

    @cached_property
    def invalid_lines(self) -> tuple[tuple[int, str], ...]:
        """(1-based line number, text) of every line that is neither an entry nor a comment."""
        return tuple(
            (number, _displayable(line.text))
            for number, line in enumerate(self.lines, start=1)
            if line.is_invalid
        )

    @property
    def header(self) -> tuple[str, ...]:
        """The comment and blank lines before the first entry or invalid line."""
        header: list[str] = []
        for line in self.lines:
            if not line.is_comment:
                break
            header.append(line.text)
        return tuple(header)

    @cached_property
    def stored_text(self) -> str:
        """The exact text to store; undecodable bytes of a hand-edited file stay as escapes."""
        return render_lines(line.text for line in self.lines)

    @cached_property
    def content(self) -> str:
        """The MEMORY.md text for display (API, prompts): `stored_text`, always valid Unicode."""
        return _displayable(self.stored_text)


def _displayable(text: str) -> str:
    return _SURROGATES.sub("\ufffd", text)


def render_lines(lines: Iterable[str]) -> str:
    """Lines joined by `\\n`, with a final newline when there is any line."""
    return "".join(f"{line}\n" for line in lines)


def render_document(header: Sequence[str], entries: Sequence[MemoryEntry]) -> str:
    """MEMORY.md text for a header and entries, one formatted line per entry."""
    return render_lines([*header, *(entry.line for entry in entries)])


def parse_line(text: str, entry_id: str) -> MemoryEntry | None:
    """The entry on one line, or None when the line is not a well-formed entry.

    Well-formed: a real ISO date, a source of 1 to MAX_SOURCE_LENGTH characters (its kind, when
    it carries provenance) and non-empty content. Content after the second `|` is taken whole
    and neutralised, so a hand-written `|` in it is read, not rejected.
    """
    match = _ENTRY.fullmatch(text)
    if match is None or _SURROGATES.search(text):
        return None
    try:
        date = dt.date.fromisoformat(match[1])
    except ValueError:
        return None
    source, content = neutralise(match[2]), neutralise(match[3])
    kind = split_source(source)[0]
    if not kind or len(kind) > MAX_SOURCE_LENGTH or not content:
        return None
    return MemoryEntry(id=entry_id, date=date, source=source, content=content)


def parse_document(text: str) -> MemoryDocument:
    """Every line of `text` (split as `str.splitlines` does), each entry with a content-derived id.

    An entry's id is the first 12 hex digits of the sha256 of its line, with `-<n>` for the n-th
    copy of a duplicated line: stable across appends, since earlier lines never change.
    """
    lines: list[DocumentLine] = []
    seen: dict[str, int] = {}
    for text_line in text.splitlines():
        digest = hashlib.sha256(text_line.encode("utf-8", "surrogateescape")).hexdigest()[:12]
        seen[digest] = seen.get(digest, 0) + 1
        entry_id = digest if seen[digest] == 1 else f"{digest}-{seen[digest]}"
        lines.append(DocumentLine(text_line, parse_line(text_line, entry_id)))
    return MemoryDocument(tuple(lines))


def standard_header(tenant_id: str, scope_key: str) -> tuple[str, ...]:
    """The header a new MEMORY.md starts with; the default tenant's is the top-level file's."""
    owner = f"for tenant {tenant_id}"
    if scope_key:
        owner = f"for one user of tenant {tenant_id}"
    elif tenant_id == DEFAULT_TENANT:
        owner = "for the default tenant"
    return (
        f"# MEMORY.md — Tally's long-term memory {owner}",
        "#",
        "# One entry per line: YYYY-MM-DD|source|content",
        "#   source: web, api, telegram:<chat>, auto-overflow, manual, ...",
        '#   content: one line; line breaks and "|" are replaced before writing.',
        '# Lines starting with "#" are comments. Entries are appended below.',
    )


def with_header(lines: Sequence[DocumentLine], header: Sequence[str]) -> list[DocumentLine]:
    """`lines`, led by `header` unless they already start with a comment line."""
    if lines and lines[0].text.startswith("#"):
        return list(lines)
    return [*(DocumentLine(text) for text in header), *lines]


def normalise_replacement(content: str, header: Sequence[str]) -> str:
    """The text to store for PUT /api/memory: entries re-formatted with neutralised fields,
    every other line kept verbatim, the standard header put back if the text has none.

    Raises InvalidInput for NUL or lone surrogates, which no store can keep faithfully.
    """
    if "\x00" in content or _SURROGATES.search(content):
        raise InvalidInput("memory text must be valid Unicode without NUL characters")
    lines = [
        line if line.entry is None else DocumentLine(line.entry.line)
        for line in parse_document(content).lines
    ]
    return render_lines(line.text for line in with_header(lines, header))
