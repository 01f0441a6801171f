"""Apply the Alembic migrations (at start-up and by `tally migrate`).

An empty database is given the newest schema directly, from the tables' definitions, and
stamped at the newest revision, as Alembic's documentation advises for a new database: a
first start then never imports Alembic either (7 to 10 MB of a process, for as long as it
runs). Tests hold the tables' definitions to what the migrations build, on both databases.

Alembic logs about ten INFO lines on every run, wanted or not: a line per plugin when it is
imported, then its dialect and DDL mode. They tell an operator nothing, so its loggers are
kept at WARNING, set before alembic is first imported (hence the imports inside the
functions); a run that applies revisions logs one line of ours instead.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import inspect, text
from sqlalchemy.engine import Connection

from backend.domain.tenants import DEFAULT_TENANT
from backend.storage.database import Database
from backend.storage.locks import lock_in_sync
from backend.storage.tables import metadata, tenants

if TYPE_CHECKING:
    from alembic.config import Config

MIGRATIONS = Path(__file__).parent / "migrations"
HEAD = "0011"  # the newest revision there (a test holds it to Alembic's own answer)

log = logging.getLogger(__name__)


def _quiet_alembic() -> None:
    logging.getLogger("alembic").setLevel(logging.WARNING)


def alembic_config(connection: Connection | None = None) -> Config:
    _quiet_alembic()
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.attributes["connection"] = connection
    return config


async def migrate(database: Database) -> None:
    """Bring the schema to the newest revision; a no-op when it is already there."""

    def upgrade(connection: Connection) -> None:
        # Processes starting together on an empty database: one migrates, the others wait
        # here and then find the schema at its newest revision.
        lock_in_sync(connection, "tally.migrate")
        revision = _revision(connection)
        if revision == HEAD:
            return  # the usual start: Alembic, 7 to 10 MB a process, is not even imported
        if revision is None and not _holds_tally_tables(connection):
            _create_newest(connection)
            log.info("database schema created at revision %s", HEAD)
            return
        config = alembic_config(connection)
        from alembic import command
        from alembic.runtime.migration import MigrationContext

        before = MigrationContext.configure(connection).get_current_heads()
        command.upgrade(config, "head")
        after = MigrationContext.configure(connection).get_current_heads()
        if after != before and before:
            log.info("database schema migrated from %s to %s", ", ".join(before), ", ".join(after))
        elif after != before:
            log.info("database schema created at revision %s", ", ".join(after))

    async with database.engine.begin() as conn:
        await conn.run_sync(upgrade)


def _holds_tally_tables(connection: Connection) -> bool:
    return bool(set(inspect(connection).get_table_names()) & set(metadata.tables))


def _create_newest(connection: Connection) -> None:
    """The newest schema, the rows the migrations add (the default tenant) and the version
    table Alembic would have left (`alembic stamp`)."""
    metadata.create_all(connection)
    connection.execute(
        tenants.insert().values(
            id=DEFAULT_TENANT, name="Default", settings={}, created_at=datetime.now(UTC)
        )
    )
    connection.execute(
        text(
            "CREATE TABLE alembic_version (version_num VARCHAR(32) NOT NULL, "
            "CONSTRAINT alembic_version_pkc PRIMARY KEY (version_num))"
        )
    )
    connection.execute(
        text("INSERT INTO alembic_version (version_num) VALUES (:head)"), {"head": HEAD}
    )


def _revision(connection: Connection) -> str | None:
    """The schema's revision as Alembic recorded it; None for a database it never touched."""
    if not inspect(connection).has_table("alembic_version"):
        return None
    revision: str | None = connection.execute(
        text("SELECT version_num FROM alembic_version")
    ).scalar()
    return revision
