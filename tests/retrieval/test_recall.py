"""Finding what a memory scope holds, on SQLite and PostgreSQL: archived turns of the scope's
sessions and nobody else's, facts found by words and by meaning, vectors embedded once and
kept with the memory, and nothing corrected or deleted coming back."""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest
from sqlalchemy import func, select

from backend.memory.entries import format_line, parse_document
from backend.retrieval.embedders import BuiltinEmbedder, EmbeddingFailed, ProviderEmbedder, Vectors
from backend.retrieval.recall import Recall, Scope
from backend.settings import ProviderSettings
from backend.storage.archive import ArchiveReader, SaidMessage
from backend.storage.database import Database
from backend.storage.memory_vectors import VectorRepository
from backend.storage.sessions import SessionRepository
from backend.storage.tables import memory_vectors
from tests.fakes.openai_server import FakeOpenAIServer
from tests.retrieval.conftest import TENANT, Archive, texts


class CountingEmbedder(BuiltinEmbedder):
    """The built-in model, counting the texts it embeds."""

    def __init__(self) -> None:
        super().__init__()
        self.embedded: list[str] = []

    async def embed(self, texts: Sequence[str]) -> Vectors:
        self.embedded += texts
        return await super().embed(texts)


class DownEmbedder(BuiltinEmbedder):
    name = "down"

    async def embed(self, texts: Sequence[str]) -> Vectors:
        raise EmbeddingFailed("the model is unreachable")


def facts(*lines: str) -> str:
    return "".join(format_line(dt.date(2026, 3, 1), "manual", line) + "\n" for line in lines)


async def stored_vectors(archive: Archive) -> int:
    async with archive.database.read() as conn:
        return int(await conn.scalar(select(func.count()).select_from(memory_vectors)) or 0)


async def test_what_another_session_of_the_scope_said_is_found(archive: Archive) -> None:
    await archive.session("We went to the LGBTQ support group on Friday.", "Lunch was fine.")
    await archive.session("The weather is grey today.")

    found = await archive.find("When did we go to the support group?")

    assert texts(found)[0] == "We went to the LGBTQ support group on Friday."
    assert "The weather is grey today." not in texts(found)
    assert found[0].role == "user" and found[0].source == "api"


async def test_another_tenants_messages_are_never_candidates(archive: Archive) -> None:
    await archive.session("The acme launch code is 7741.", tenant_id="acme")
    await archive.session("Our launch is on Monday.")

    found = await archive.find("What is the launch code?")

    assert texts(found) == ["Our launch is on Monday."]


async def test_under_user_scope_only_that_users_sessions_are_searched(archive: Archive) -> None:
    await archive.session("My locker code is 1122.", user="ada")
    await archive.session("My locker code is 3344.", user="bob")
    await archive.session("My locker code is 5566.")  # no end user

    ada = await archive.find("locker code", scope=Scope("default", "ada", ("ada",)))
    both = await archive.find("locker code", scope=Scope("default", "p", ("ada", "bob")))
    nobody = await archive.find("locker code", scope=Scope("default", "", ()))

    assert texts(ada) == ["My locker code is 1122."]
    assert set(texts(both)) == {"My locker code is 1122.", "My locker code is 3344."}
    assert texts(nobody) == ["My locker code is 5566."]


async def test_a_deleted_sessions_messages_never_come_back(archive: Archive) -> None:
    gone = await archive.session("My passport number is X1234567.")
    assert texts(await archive.find("passport number")) == ["My passport number is X1234567."]

    await SessionRepository(archive.database).delete(tenant_id="default", session_id=gone)

    assert await archive.find("passport number") == []


async def test_a_session_deleted_by_another_process_never_comes_back(
    archive: Archive, database_url: str
) -> None:
    if not archive.database.is_shared:
        pytest.skip("a SQLite database has one serving process: its deletions are told")
    gone = await archive.session("My passport number is X7654321.")
    assert texts(await archive.find("passport number")) == ["My passport number is X7654321."]
    other_process = Database(database_url)  # its deletions are not told to this Recall
    await SessionRepository(other_process).delete(tenant_id="default", session_id=gone)
    await other_process.dispose()

    assert await archive.find("passport number") == []


async def test_a_value_corrected_later_never_comes_back_from_the_archive(archive: Archive) -> None:
    await archive.session("My phone number is 555 0101.", "Tea is ready.")
    await archive.session("My phone number is now 555 0202.")
    await archive.session("我的手机号是13800000000。", "我的手机号改成了13912345678。")

    english = texts(await archive.find("What is my phone number?"))
    chinese = texts(await archive.find("我的手机号是多少？"))

    assert english == ["My phone number is now 555 0202."]
    assert chinese == ["我的手机号改成了13912345678。"]


async def test_a_message_a_replaced_fact_came_from_is_shadowed(archive: Archive) -> None:
    session = await archive.session("Call me on 555 0101 after six.", "I like plums.")
    first, last = 1, 4  # the session's four messages
    memory = (
        f"2026-03-01|auto-overflow@{session}:{first}-{last}|Phone 555 0101; likes plums\n"
        f"2026-03-02|manual>1.1|Phone 555 0202\n"  # replaces the first line's first fact
    )
    # Line ids are content hashes: name the first line's id in the second.
    first_id = parse_document(memory).entries[0].id
    memory = memory.replace("manual>1.1", f"manual>{first_id}.1")

    found = texts(await archive.find("phone 555", memory=memory))

    assert "Phone 555 0202" in found and "Call me on 555 0101 after six." not in found
    assert "Phone 555 0101" not in found


async def test_a_fact_that_shares_no_word_with_the_question_is_found_by_meaning(
    archive: Archive,
) -> None:
    memory = facts("Our puppy is called Rex.", "The invoice was paid on Tuesday.")

    by_meaning = texts(await archive.find("What is my dog's name?", memory=memory))
    archive.embedder = None
    by_words = texts(await archive.find("What is my dog's name?", memory=memory))

    assert by_meaning == ["Our puppy is called Rex."]
    assert by_words == []


async def test_facts_are_embedded_once_and_their_vectors_kept_with_the_memory(
    archive: Archive,
) -> None:
    memory = facts("Jon flew to Paris.", "Maria adopted a cat.")
    await archive.session("Good morning!")
    counting = CountingEmbedder()
    archive.embedder = counting

    await archive.find("Where did Jon fly?", memory=memory)
    stored = await stored_vectors(archive)
    restarted = Recall(
        archive=ArchiveReader(archive.database), vectors=VectorRepository(archive.database)
    )
    again = CountingEmbedder()
    index = await restarted.refreshed(TENANT, parse_document(memory), again)
    restarted.close()

    assert sorted(set(counting.embedded) - {"Where did Jon fly?"}) == [
        "Good morning!",
        "Jon flew to Paris.",
        "Maria adopted a cat.",
        "Noted.",
    ]
    assert stored == 2  # the facts'; a local model's message vectors are made, not stored
    assert sorted(again.embedded) == ["Good morning!", "Noted."]  # facts read back
    assert len(index.vectors) == 4


async def test_a_forgotten_facts_vector_is_deleted(archive: Archive) -> None:
    await archive.find("Paris", memory=facts("Jon flew to Paris.", "Maria adopted a cat."))
    await archive.find("Paris", memory=facts("Maria adopted a cat."))

    assert await stored_vectors(archive) == 1


async def test_without_an_embedding_model_words_alone_rank(archive: Archive) -> None:
    archive.embedder = DownEmbedder()
    await archive.session("The boiler was serviced in May.")

    found = await archive.find("What about the boiler?", memory=facts("Boiler: Vaillant"))

    assert set(texts(found)) == {"The boiler was serviced in May.", "Boiler: Vaillant"}


@pytest.mark.parametrize("encoding", ["float", "base64"])
async def test_a_providers_embeddings_are_used_and_a_remote_models_vectors_all_kept(
    archive: Archive, encoding: str
) -> None:
    with FakeOpenAIServer() as server:
        settings = ProviderSettings(kind="openai_compatible", base_url=server.base_url)
        embedder = ProviderEmbedder("vendor", settings, "embed-small", 48)
        archive.embedder = embedder
        session = await archive.session("The garage door code is 4455.")
        memory = facts("Garage: double, north side")

        found = texts(await archive.find("garage door code", memory=memory))
        await embedder.aclose()
        requests = [r for r in server.requests if r.path == "/v1/embeddings"]

    assert found[0] == "The garage door code is 4455."
    assert requests and all(r.body["dimensions"] == 48 for r in requests)
    assert await stored_vectors(archive) == 3  # the fact and both messages
    await SessionRepository(archive.database).delete(tenant_id="default", session_id=session)
    assert await stored_vectors(archive) == 1  # a message's vector goes with it


@pytest.mark.slow
async def test_a_failing_providers_embeddings_leave_ranking_to_words(archive: Archive) -> None:
    with FakeOpenAIServer() as server:
        server.embeddings_status = 503
        settings = ProviderSettings(kind="openai_compatible", base_url=server.base_url)
        embedder = ProviderEmbedder("vendor", settings, "embed-small", None)
        archive.embedder = embedder
        await archive.session("The garage door code is 4455.")

        found = texts(await archive.find("garage door code"))
        await embedder.aclose()

    assert found == ["The garage door code is 4455."]
    assert await stored_vectors(archive) == 0


def test_normalised_rows_have_unit_length() -> None:
    from backend.retrieval.embedders import normalised

    rows = normalised([[3.0, 4.0], [0.0, 0.0]])
    assert np.allclose(np.linalg.norm(rows[0]), 1.0) and not rows[1].any()


class HeldReader(ArchiveReader):
    """Counts its reads; the first waits until it is let go."""

    def __init__(self, archive: Archive) -> None:
        super().__init__(archive.database)
        self.reads = 0
        self.reading = asyncio.Event()
        self.let_go = asyncio.Event()

    async def said_after(self, **asked: Any) -> list[SaidMessage]:
        self.reads += 1
        if self.reads == 1:
            self.reading.set()
            await self.let_go.wait()
        return await super().said_after(**asked)


async def test_refreshes_waiting_on_one_another_share_one_read_and_miss_nothing(
    archive: Archive,
) -> None:
    reader = HeldReader(archive)
    recall = Recall(archive=reader, vectors=VectorRepository(archive.database))
    archive.database.notices.listen(recall)
    await archive.session("The boat is moored at pier 9.")
    first = asyncio.create_task(recall.refreshed(TENANT, parse_document(""), None))
    await reader.reading.wait()
    await archive.session("The spare oars are in the shed.")  # said after that read began
    waiting = [
        asyncio.create_task(recall.refreshed(TENANT, parse_document(""), None)) for _ in range(4)
    ]
    await asyncio.sleep(0)  # one turn of the loop: each asks, then waits for the first
    reader.let_go.set()
    indexes = await asyncio.gather(first, *waiting)
    recall.close()

    assert reader.reads == 2  # the first, and one for the four that asked during it
    texts_indexed = {item.text for item in indexes[-1].items.values()}
    assert {"The boat is moored at pier 9.", "The spare oars are in the shed."} <= texts_indexed


async def test_on_a_database_of_its_own_a_message_said_is_indexed_with_no_query(
    archive: Archive,
) -> None:
    reader = HeldReader(archive)
    reader.let_go.set()
    recall = Recall(archive=reader, vectors=VectorRepository(archive.database))
    archive.database.notices.listen(recall)
    archive.recall = recall
    session = await archive.session("The kayak is blue.")
    await archive.find("kayak")
    await archive.say(session, "The paddles are in the garage.")

    found = texts(await archive.find("Where are the paddles?"))
    recall.close()

    assert found == ["The paddles are in the garage."]
    # SQLite: the notice brought it; PostgreSQL, shared with other processes: a second read.
    assert reader.reads == (2 if archive.database.is_shared else 1)
