"""`tally serve`: check everything the config implies, then serve HTTP, in one process or in
`--workers N` (PostgreSQL only: SQLite's writers serialize inside one process).

A config that cannot work (an unknown tool, a missing template, a missing key) stops here,
naming the file, the key path and the reason, before anything listens. Workers are uvicorn's:
each builds its app with `backend.app:app_from_environment` from the config file and the
address this command was given, passed on in the environment.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import sys
from collections.abc import Mapping
from pathlib import Path

from backend.open_files import raise_open_files_limit
from backend.settings import Settings

log = logging.getLogger("tally")


def run_server(
    settings: Settings, *, host: str | None, port: int | None, is_public: bool, workers: int = 1
) -> int:
    import uvicorn

    from backend.app import create_app, listening_settings, uvicorn_options
    from backend.composition import check_settings

    listen = {"host": host, "port": port, "is_public": is_public}
    settings = listening_settings(settings, host=host, port=port, is_public=is_public)
    server = settings.server
    if settings.auth.mode == "none" and not server.is_loopback and not is_public:
        print(
            f"tally: refusing to listen on {server.host} with auth.mode: none (anyone could"
            " chat).\nListen on 127.0.0.1, or pass --insecure-public if you really mean it.",
            file=sys.stderr,
        )
        return 2
    problem = workers_problem(settings, workers)
    if problem:
        print(f"tally: {problem}", file=sys.stderr)
        return 2
    if workers > settings.database.processes:  # the pool budget counts this host's workers
        database = settings.database.model_copy(update={"processes": workers})
        settings = settings.model_copy(update={"database": database})
    asyncio.run(check_settings(settings))
    open_files = raise_open_files_limit()  # workers inherit it
    options = {"log_level": "info", "access_log": False, **uvicorn_options(settings)}
    where = (server.host, server.port, settings.database.url.split("://")[0])
    if workers == 1:
        log.info("serving on http://%s:%s (database %s, %s open files)", *where, open_files)
        uvicorn.run(create_app(settings), host=server.host, port=server.port, **options)
        return 0
    _prepare_workers(settings, listen)
    log.info("serving on http://%s:%s with %s workers (database %s)", *where[:2], workers, where[2])
    uvicorn.run(
        "backend.app:app_from_environment",
        factory=True,
        workers=workers,
        host=server.host,
        port=server.port,
        **options,
    )
    return 0


def workers_problem(settings: Settings, workers: int) -> str | None:
    if workers < 1:
        return "--workers takes a number of processes, 1 or more"
    if workers > 1 and settings.database.url.startswith("sqlite"):
        return (
            f"--workers {workers} needs PostgreSQL (database.url): SQLite's writers serialize "
            "inside one process, so run one worker on SQLite"
        )
    if workers > 1 and settings.coordination.redis_url is None:
        return (
            f"--workers {workers} needs coordination.redis_url: workers share cancels and "
            "the requests-per-minute window through Redis"
        )
    return None


def _prepare_workers(settings: Settings, listen: Mapping[str, object]) -> None:
    """What each worker process reads at start: the config file, the address, and a fresh
    folder for the workers' shared metrics (stale files would add to the counters)."""
    import json

    from backend.app import LISTEN_ENV
    from backend.metrics import MULTIPROCESS_ENV

    if Path(settings.source).is_file():  # else the built-in defaults, in every worker too
        os.environ["TALLY_CONFIG"] = settings.source
    os.environ[LISTEN_ENV] = json.dumps(listen)
    folder = Path(settings.data_dir) / "metrics"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    os.environ[MULTIPROCESS_ENV] = str(folder)
