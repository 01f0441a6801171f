"""Apply the Alembic migrations (at start-up and by `tally migrate`).

Alembic logs about ten INFO lines on every run, wanted or not: a line per plugin when it is
imported, then its dialect and DDL mode. They tell an operator nothing, so its loggers are
kept at WARNING, set before alembic is first imported (hence the imports inside the
functions); a run that applies revisions logs one line of ours instead.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import inspect, text
from sqlalchemy.engine import Connection

from backend.storage.database import Database
from backend.storage.locks import lock_in_sync

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
        if _revision(connection) == HEAD:
            return  # the usual start: Alembic, 7 to 10 MB a process, is not even imported
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


def _revision(connection: Connection) -> str | None:
    """The schema's revision as Alembic recorded it; None for a database it never touched."""
    if not inspect(connection).has_table("alembic_version"):
        return None
    revision: str | None = connection.execute(
        text("SELECT version_num FROM alembic_version")
    ).scalar()
    return revision
