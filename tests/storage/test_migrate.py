"""Starting on a database at the newest revision asks Alembic nothing (it is not even imported:
7 to 10 MB a process); one behind or empty is migrated."""

from __future__ import annotations

from alembic.script import ScriptDirectory
from sqlalchemy import text

from backend.storage.database import Database
from backend.storage.migrate import HEAD, alembic_config, migrate


def test_the_head_named_is_alembic_s_newest_revision() -> None:
    assert ScriptDirectory.from_config(alembic_config()).get_current_head() == HEAD


async def test_a_database_behind_the_newest_revision_is_migrated_and_one_at_it_is_left(
    database_url: str,
) -> None:
    database = Database(database_url)
    try:
        await migrate(database)
        async with database.write() as conn:  # as if the last migration had not run
            await conn.execute(text("DROP TABLE memory_vectors"))
            await conn.execute(text("UPDATE alembic_version SET version_num = '0010'"))
        await migrate(database)
        async with database.read() as conn:
            revision = (
                await conn.execute(text("SELECT version_num FROM alembic_version"))
            ).scalar()
            vectors = (await conn.execute(text("SELECT count(*) FROM memory_vectors"))).scalar()
        await migrate(database)  # at the newest: nothing to do, nothing done
    finally:
        await database.dispose()

    assert (revision, vectors) == (HEAD, 0)
