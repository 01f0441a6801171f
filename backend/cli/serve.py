"""`tally serve`: check everything the config implies, then serve HTTP (one worker).

A config that cannot work (an unknown tool, a missing template, a missing key) stops here,
naming the file, the key path and the reason, before anything listens.
"""

from __future__ import annotations

import asyncio
import logging
import sys

from backend.settings import Settings

log = logging.getLogger("tally")


def listening_settings(
    settings: Settings, *, host: str | None, port: int | None, is_public: bool
) -> Settings:
    """The settings with the command line's address. Forced public without keys
    (`--insecure-public` beyond loopback), callers come by any name, so unless
    `server.allowed_hosts` names them no Host is refused."""
    server = settings.server.model_copy(
        update={
            "host": host or settings.server.host,
            "port": settings.server.port if port is None else port,
        }
    )
    is_open = is_public and not server.is_loopback and settings.auth.mode == "none"
    if is_open and server.allowed_hosts is None:
        server = server.model_copy(update={"allowed_hosts": ["*"]})
    return settings.model_copy(update={"server": server})


def run_server(settings: Settings, *, host: str | None, port: int | None, is_public: bool) -> int:
    import uvicorn

    from backend.app import create_app, uvicorn_options
    from backend.composition import check_settings

    settings = listening_settings(settings, host=host, port=port, is_public=is_public)
    server = settings.server
    if settings.auth.mode == "none" and not server.is_loopback and not is_public:
        print(
            f"tally: refusing to listen on {server.host} with auth.mode: none (anyone could"
            " chat).\nListen on 127.0.0.1, or pass --insecure-public if you really mean it.",
            file=sys.stderr,
        )
        return 2
    asyncio.run(check_settings(settings))
    app = create_app(settings)
    log.info(
        "serving on http://%s:%s (database %s)",
        server.host,
        server.port,
        settings.database.url.split("://")[0],
    )
    # One worker: SQLite's writers serialize in-process (see storage/database.py).
    uvicorn.run(
        app,
        host=server.host,
        port=server.port,
        log_level="info",
        access_log=False,
        **uvicorn_options(settings),
    )
    return 0
