"""Apply the Alembic migrations (at start-up and by `tally migrate`)."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from sqlalchemy.engine import Connection

from backend.storage.database import Database

MIGRATIONS = Path(__file__).parent / "migrations"


def alembic_config(connection: Connection | None = None) -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.attributes["connection"] = connection
    return config


async def migrate(database: Database) -> None:
    """Bring the schema to the newest revision; a no-op when it is already there."""

    def upgrade(connection: Connection) -> None:
        command.upgrade(alembic_config(connection), "head")

    async with database.engine.begin() as conn:
        await conn.run_sync(upgrade)
