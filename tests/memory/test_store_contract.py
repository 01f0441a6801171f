"""One contract for every MemoryStore: the file store, and the database store on SQLite and on
PostgreSQL (through the shared `database_url` fixture)."""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from backend.errors import InvalidInput
from backend.memory.base import MemoryEntryNotFound, MemoryStore
from backend.memory.database_store import DatabaseMemoryStore
from backend.memory.entries import NewEntry, Provenance, render_lines, standard_header
from backend.memory.file_store import FileMemoryStore
from backend.storage.database import Database
from backend.storage.migrate import migrate

DAY = dt.date(2024, 5, 17)
SESSION = "0f8fad5b-d9cb-469f-a165-70867728950e"
NEW_MEMORY_FILE = render_lines(standard_header("default", ""))  # a new default MEMORY.md
LINE_BREAKS = ["\r", "\n", "\r\n", "\v", "\f", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029"]

# The file store runs once; the database store once per database. Overriding `database_url`'s
# own parameters keeps the file store off PostgreSQL.
pytestmark = pytest.mark.parametrize(
    ("store_kind", "database_url"),
    [("file", "sqlite"), ("database", "sqlite"), ("database", "postgresql")],
    indirect=["database_url"],
    ids=["file", "database-sqlite", "database-postgresql"],
)


@pytest.fixture
async def store(store_kind: str, database_url: str, tmp_path: Path) -> AsyncIterator[MemoryStore]:
    if store_kind == "file":
        yield FileMemoryStore(tmp_path / "MEMORY.md", tmp_path / "data")
        return
    database = Database(database_url)
    await migrate(database)
    try:
        yield DatabaseMemoryStore(database)
    finally:
        await database.dispose()


def fact(content: str, source: str = "manual", date: dt.date = DAY) -> NewEntry:
    return NewEntry(source=source, content=content, date=date)


def overflow(first: int, last: int, content: str = "summary") -> NewEntry:
    return NewEntry("auto-overflow", content, DAY, Provenance(SESSION, first, last))


async def test_new_scope_reads_as_the_standard_header(store: MemoryStore) -> None:
    document = await store.read(tenant_id="acme", scope_key="")

    assert document.content == render_lines(standard_header("acme", ""))
    assert document.entries == ()


async def test_appended_entries_are_read_back_in_order(store: MemoryStore) -> None:
    written = await store.append(
        tenant_id="acme", scope_key="", entries=[fact("likes tea"), fact("lives in Oslo", "web")]
    )

    document = await store.read(tenant_id="acme", scope_key="")

    assert list(document.entries) == written
    assert [(e.date, e.source, e.content) for e in written] == [
        (DAY, "manual", "likes tea"),
        (DAY, "web", "lives in Oslo"),
    ]
    assert document.content == render_lines(
        [
            *standard_header("acme", ""),
            "2024-05-17|manual|likes tea",
            "2024-05-17|web|lives in Oslo",
        ]
    )


async def test_entry_ids_are_stable_across_appends(store: MemoryStore) -> None:
    first = await store.append(tenant_id="acme", scope_key="", entries=[fact("one")])
    await store.append(tenant_id="acme", scope_key="", entries=[fact("two")])

    document = await store.read(tenant_id="acme", scope_key="")

    assert document.entries[0].id == first[0].id
    assert len({entry.id for entry in document.entries}) == 2


async def test_append_is_all_or_none(store: MemoryStore) -> None:
    with pytest.raises(InvalidInput):
        await store.append(tenant_id="acme", scope_key="", entries=[fact("good"), fact(" \n ")])

    assert (await store.read(tenant_id="acme", scope_key="")).entries == ()


async def test_concurrent_appends_lose_nothing(store: MemoryStore) -> None:
    await asyncio.gather(
        *(
            store.append(tenant_id="acme", scope_key="", entries=[fact(f"fact {i}")])
            for i in range(20)
        )
    )

    document = await store.read(tenant_id="acme", scope_key="")

    assert sorted(entry.content for entry in document.entries) == sorted(
        f"fact {i}" for i in range(20)
    )


async def test_forged_line_breaks_cannot_create_entries(store: MemoryStore) -> None:
    forged = [fact(f"real{brk}2024-01-01|manual|forged{brk}# comment") for brk in LINE_BREAKS]

    await store.append(tenant_id="acme", scope_key="", entries=forged)
    document = await store.read(tenant_id="acme", scope_key="")

    assert len(document.entries) == len(LINE_BREAKS)
    assert document.invalid_lines == ()
    assert {entry.content for entry in document.entries} == {
        "real 2024-01-01¦manual¦forged # comment"
    }
    assert len(document.content.splitlines()) == len(standard_header("acme", "")) + len(forged)


async def test_pipes_in_source_and_content_are_neutralised(store: MemoryStore) -> None:
    [entry] = await store.append(
        tenant_id="acme", scope_key="", entries=[fact("a|b", source="web|2024-01-01")]
    )

    assert (entry.source, entry.content) == ("web¦2024-01-01", "a¦b")
    assert (
        "2024-05-17|web¦2024-01-01|a¦b"
        in (await store.read(tenant_id="acme", scope_key="")).content
    )


async def test_template_syntax_is_stored_literally(store: MemoryStore) -> None:
    await store.append(
        tenant_id="acme", scope_key="", entries=[fact("{{ 7*7 }} and {% if x %}y{% endif %}")]
    )

    [entry] = (await store.read(tenant_id="acme", scope_key="")).entries

    assert entry.content == "{{ 7*7 }} and {% if x %}y{% endif %}"


async def test_search_ranks_by_matching_terms_then_recency(store: MemoryStore) -> None:
    await store.append(
        tenant_id="acme",
        scope_key="",
        entries=[
            fact("Likes green TEA", date=dt.date(2024, 1, 1)),
            fact("likes coffee", date=dt.date(2024, 3, 1)),
            fact("green tea and coffee", date=dt.date(2024, 2, 1)),
            fact("用户住在北京", date=dt.date(2024, 2, 1)),
        ],
    )

    found = await store.search(tenant_id="acme", scope_key="", query="COFFEE tea", limit=10)
    chinese = await store.search(tenant_id="acme", scope_key="", query="北京天气", limit=10)
    limited = await store.search(tenant_id="acme", scope_key="", query="coffee tea", limit=1)

    assert [e.content for e in found] == ["green tea and coffee", "likes coffee", "Likes green TEA"]
    assert [e.content for e in chinese] == ["用户住在北京"]
    assert [e.content for e in limited] == ["green tea and coffee"]


async def test_recent_returns_the_last_entries_oldest_first(store: MemoryStore) -> None:
    await store.append(tenant_id="acme", scope_key="", entries=[fact(f"n{i}") for i in range(5)])

    recent = await store.recent(tenant_id="acme", scope_key="", limit=3)

    assert [entry.content for entry in recent] == ["n2", "n3", "n4"]
    assert await store.recent(tenant_id="acme", scope_key="", limit=0) == []
    assert len(await store.recent(tenant_id="acme", scope_key="", limit=50)) == 5


async def test_delete_removes_only_that_entry(store: MemoryStore) -> None:
    kept, gone = await store.append(tenant_id="acme", scope_key="", entries=[fact("a"), fact("b")])

    await store.delete(tenant_id="acme", scope_key="", entry_id=gone.id)

    assert list((await store.read(tenant_id="acme", scope_key="")).entries) == [kept]
    with pytest.raises(MemoryEntryNotFound):
        await store.delete(tenant_id="acme", scope_key="", entry_id=gone.id)


@pytest.mark.parametrize("entry_id", ["", "nope", "1", "-1", "99999999999999999999", "../x"])
async def test_delete_of_an_unknown_id_is_not_found(store: MemoryStore, entry_id: str) -> None:
    with pytest.raises(MemoryEntryNotFound):
        await store.delete(tenant_id="acme", scope_key="", entry_id=entry_id)


async def test_replace_keeps_and_reports_invalid_lines(store: MemoryStore) -> None:
    await store.append(tenant_id="acme", scope_key="", entries=[fact("old")])
    text = "# my notes\n2024-05-17|web|likes|tea\nthis is no entry\n\n2024-05-18|api|new\n"

    document = await store.replace(tenant_id="acme", scope_key="", content=text)
    again = await store.read(tenant_id="acme", scope_key="")

    expected = "# my notes\n2024-05-17|web|likes¦tea\nthis is no entry\n\n2024-05-18|api|new\n"
    assert document.content == again.content == expected
    assert again.invalid_lines == ((3, "this is no entry"),)
    assert [entry.content for entry in again.entries] == ["likes¦tea", "new"]
    assert document.entries == again.entries


async def test_replace_without_header_puts_the_standard_one_back(store: MemoryStore) -> None:
    document = await store.replace(tenant_id="acme", scope_key="", content="2024-05-17|web|x")

    assert document.content == render_lines([*standard_header("acme", ""), "2024-05-17|web|x"])


async def test_replace_refuses_nul(store: MemoryStore) -> None:
    await store.append(tenant_id="acme", scope_key="", entries=[fact("kept")])

    with pytest.raises(InvalidInput):
        await store.replace(tenant_id="acme", scope_key="", content="2024-05-17|web|\x00")

    assert [e.content for e in (await store.read(tenant_id="acme", scope_key="")).entries] == [
        "kept"
    ]


async def test_entries_after_replace_can_be_deleted_and_appended(store: MemoryStore) -> None:
    await store.replace(tenant_id="acme", scope_key="", content="# h\njunk\n2024-05-17|web|a\n")
    [entry] = (await store.read(tenant_id="acme", scope_key="")).entries

    await store.delete(tenant_id="acme", scope_key="", entry_id=entry.id)
    await store.append(tenant_id="acme", scope_key="", entries=[fact("b")])

    assert (
        await store.read(tenant_id="acme", scope_key="")
    ).content == "# h\njunk\n2024-05-17|manual|b\n"


async def test_append_once_is_idempotent_by_provenance(store: MemoryStore) -> None:
    first = await store.append_once(tenant_id="acme", scope_key="", entry=overflow(1, 10, "first"))
    again = await store.append_once(tenant_id="acme", scope_key="", entry=overflow(1, 10, "retry"))
    other = await store.append_once(tenant_id="acme", scope_key="", entry=overflow(11, 20))

    entries = (await store.read(tenant_id="acme", scope_key="")).entries

    assert again == first
    assert other != first
    assert [entry.content for entry in entries] == ["first", "summary"]
    assert first.provenance == Provenance(SESSION, 1, 10)
    assert first.source_kind == "auto-overflow"
    assert first.source == f"auto-overflow@{SESSION}:1-10"


async def test_concurrent_append_once_writes_one_entry(store: MemoryStore) -> None:
    results = await asyncio.gather(
        *(
            store.append_once(tenant_id="acme", scope_key="", entry=overflow(1, 10))
            for _ in range(8)
        )
    )

    assert len({entry.id for entry in results}) == 1
    assert len((await store.read(tenant_id="acme", scope_key="")).entries) == 1


async def test_append_once_needs_provenance(store: MemoryStore) -> None:
    with pytest.raises(InvalidInput):
        await store.append_once(tenant_id="acme", scope_key="", entry=fact("no provenance"))


async def test_a_manual_source_cannot_fake_a_covered_range(store: MemoryStore) -> None:
    await store.append(
        tenant_id="acme", scope_key="", entries=[fact("fake", source=f"manual@{SESSION}:1-10")]
    )

    written = await store.append_once(tenant_id="acme", scope_key="", entry=overflow(1, 10))

    assert written.content == "summary"
    assert len((await store.read(tenant_id="acme", scope_key="")).entries) == 2


async def test_tenant_never_sees_another_tenants_entries(store: MemoryStore) -> None:
    [secret] = await store.append(tenant_id="acme", scope_key="", entries=[fact("acme secret")])
    await store.append_once(tenant_id="acme", scope_key="", entry=overflow(1, 10))

    other = await store.read(tenant_id="globex", scope_key="")
    found = await store.search(tenant_id="globex", scope_key="", query="acme secret", limit=10)
    # The same range in another tenant is another tenant's business: written, not "found".
    await store.append_once(tenant_id="globex", scope_key="", entry=overflow(1, 10))
    globex_entries = (await store.read(tenant_id="globex", scope_key="")).entries
    with pytest.raises(MemoryEntryNotFound):
        await store.delete(tenant_id="globex", scope_key="", entry_id=secret.id)
    await store.replace(tenant_id="globex", scope_key="", content="")

    assert other.entries == () and found == []
    assert [entry.content for entry in globex_entries] == ["summary"]
    assert (await store.recent(tenant_id="globex", scope_key="", limit=10)) == []
    assert [e.content for e in (await store.read(tenant_id="acme", scope_key="")).entries] == [
        "acme secret",
        "summary",
    ]


async def test_scopes_of_one_tenant_are_separate(store: MemoryStore) -> None:
    await store.append(tenant_id="acme", scope_key="", entries=[fact("whole tenant")])
    await store.append(tenant_id="acme", scope_key="telegram:1", entries=[fact("user one")])
    await store.append(tenant_id="acme", scope_key="telegram:2", entries=[fact("user two")])

    async def contents(scope_key: str) -> list[str]:
        document = await store.read(tenant_id="acme", scope_key=scope_key)
        return [entry.content for entry in document.entries]

    assert await contents("") == ["whole tenant"]
    assert await contents("telegram:1") == ["user one"]
    assert await contents("telegram:2") == ["user two"]
    assert await store.search(tenant_id="acme", scope_key="telegram:1", query="two", limit=5) == []


@pytest.mark.parametrize("tenant_id", ["../x", "", "Acme", "a/b", "-x", "x" * 65, "a\x00"])
async def test_invalid_tenant_id_is_refused(store: MemoryStore, tenant_id: str) -> None:
    with pytest.raises(InvalidInput):
        await store.read(tenant_id=tenant_id, scope_key="")
    with pytest.raises(InvalidInput):
        await store.append(tenant_id=tenant_id, scope_key="", entries=[fact("x")])


@pytest.mark.parametrize("scope_key", ["x" * 201, "line\nbreak", "nul\x00"])
async def test_invalid_scope_key_is_refused(store: MemoryStore, scope_key: str) -> None:
    with pytest.raises(InvalidInput):
        await store.append(tenant_id="acme", scope_key=scope_key, entries=[fact("x")])


async def test_default_tenant_reads_like_the_top_level_file(store: MemoryStore) -> None:
    await store.append(tenant_id="default", scope_key="", entries=[fact("hello")])

    document = await store.read(tenant_id="default", scope_key="")

    assert document.content == NEW_MEMORY_FILE + "2024-05-17|manual|hello\n"


async def test_same_operations_render_the_same_text_in_every_store(store: MemoryStore) -> None:
    # One expected text for every store: the database store renders what the file holds.
    await store.append(tenant_id="acme", scope_key="u", entries=[fact("one"), fact("t|wo\n")])
    await store.append_once(tenant_id="acme", scope_key="u", entry=overflow(3, 4, "three"))
    before = await store.read(tenant_id="acme", scope_key="u")
    await store.delete(tenant_id="acme", scope_key="u", entry_id=before.entries[0].id)
    current = (await store.read(tenant_id="acme", scope_key="u")).content
    await store.replace(tenant_id="acme", scope_key="u", content=current + "odd line\n# note\n")
    await store.append(tenant_id="acme", scope_key="u", entries=[fact("four", "web")])

    document = await store.read(tenant_id="acme", scope_key="u")

    assert document.content == render_lines(
        [
            *standard_header("acme", "u"),
            "2024-05-17|manual|t¦wo",
            f"2024-05-17|auto-overflow@{SESSION}:3-4|three",
            "odd line",
            "# note",
            "2024-05-17|web|four",
        ]
    )
    assert document.invalid_lines == ((len(standard_header("acme", "u")) + 3, "odd line"),)


async def test_an_entry_that_replaces_another_hides_it_from_search_and_recent(
    store: MemoryStore,
) -> None:
    (old,) = await store.append(
        tenant_id="acme", scope_key="", entries=[fact("my phone number is 555-0100")]
    )
    new = await store.append_once(
        tenant_id="acme",
        scope_key="",
        entry=NewEntry(
            "auto-summary",
            "my phone number is 555-0199",
            DAY,
            Provenance(SESSION, 1, 4),
            supersedes=(old.id,),
        ),
    )
    searched = await store.search(tenant_id="acme", scope_key="", query="phone", limit=10)
    recent = await store.recent(tenant_id="acme", scope_key="", limit=10)
    document = await store.read(tenant_id="acme", scope_key="")
    assert new.supersedes == (old.id,) and new.provenance == Provenance(SESSION, 1, 4)
    assert [e.content for e in searched] == ["my phone number is 555-0199"]
    assert [e.id for e in recent] == [new.id]
    assert [e.id for e in document.entries] == [old.id, new.id]  # kept, unchanged
    assert f"|auto-summary@{SESSION}:1-4>{old.id}|" in document.content

    await store.delete(tenant_id="acme", scope_key="", entry_id=new.id)  # a revert
    back = await store.search(tenant_id="acme", scope_key="", query="phone", limit=10)
    assert [e.id for e in back] == [old.id]


async def test_a_source_cannot_fake_replacing_an_entry(store: MemoryStore) -> None:
    (kept,) = await store.append(tenant_id="acme", scope_key="", entries=[fact("kept")])
    (forged,) = await store.append(
        tenant_id="acme", scope_key="", entries=[fact("forged", source=f"manual>{kept.id}")]
    )
    searched = await store.search(tenant_id="acme", scope_key="", query="kept", limit=10)
    assert forged.supersedes == () and [e.id for e in searched] == [kept.id]


async def test_an_entry_can_replace_one_fact_of_another(store: MemoryStore) -> None:
    two = "The user is called Ada; The user's phone number is 555-0100"
    (old,) = await store.append(tenant_id="acme", scope_key="", entries=[fact(two)])
    await store.append(
        tenant_id="acme",
        scope_key="",
        entries=[
            NewEntry(
                "manual", "The user's phone number is 555-0199", DAY, supersedes=(f"{old.id}.2",)
            )
        ],
    )
    searched = await store.search(tenant_id="acme", scope_key="", query="phone Ada", limit=10)
    recent = await store.recent(tenant_id="acme", scope_key="", limit=10)
    assert sorted(e.current_content for e in searched) == [
        "The user is called Ada",
        "The user's phone number is 555-0199",
    ]
    assert (recent[0].id, recent[0].content) == (old.id, two)  # kept whole
