"""Starting on a database at the newest revision, or on an empty one, asks Alembic nothing (it
is not even imported: 7 to 10 MB a process); one behind is migrated."""

from __future__ import annotations

from alembic import command
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import text

from backend.storage.database import Database
from backend.storage.migrate import HEAD, alembic_config, migrate
from tests.storage.test_migration_0006 import _differences


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


async def test_an_empty_database_is_created_at_the_newest_revision_alembic_can_move_on_from(
    database_url: str,
) -> None:
    database = Database(database_url)
    try:
        await migrate(database)
        async with database.engine.begin() as conn:
            heads = await conn.run_sync(
                lambda sync: MigrationContext.configure(sync).get_current_heads()
            )
            # A later revision will start from it: the newest one undone and done again.
            await conn.run_sync(lambda sync: command.downgrade(alembic_config(sync), "0010"))
            await conn.run_sync(lambda sync: command.upgrade(alembic_config(sync), "head"))
            differences = await conn.run_sync(_differences)
    finally:
        await database.dispose()

    assert heads == (HEAD,)
    assert differences == []
