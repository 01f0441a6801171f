"""`tally serve`: check everything the config implies, then serve HTTP, in one process or in
`--workers N` (PostgreSQL only: SQLite's writers serialize inside one process).

The address is taken first, so a port in use is named at once (with `--port`, the way out).
A config that cannot work (an unknown tool, a missing template, a missing key) stops here,
naming the file, the key path and the reason, before anything listens. "serving on …" is
said once requests are answered: after the app started, or after every worker did. Workers
are uvicorn's: each builds its app with `backend.app:app_from_environment` from the config
file and the address this command was given, passed on in the environment.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import os
import shutil
import socket
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from backend.cli.logs import configure_logging, log_config
from backend.host.open_files import raise_open_files_limit
from backend.settings import ServerSettings, Settings

log = logging.getLogger("tally")

# uvicorn kills a worker that does not answer its supervisor's ping within this many seconds.
# Its default, 5 s, is shorter than a worker's start on a busy machine: the worker imports
# and builds the app while its answering thread waits for the interpreter, and was killed
# ("Child process [N] died") before a replacement, just as slow, came up.
WORKER_HEALTHCHECK_S = 60
WORKER_READY_S = 300  # how long `serve` waits for its workers before saying it serves


def run_server(
    settings: Settings, *, host: str | None, port: int | None, is_public: bool, workers: int = 1
) -> int:
    from backend.app import listening_settings

    listen = {"host": host, "port": port, "is_public": is_public}
    settings = listening_settings(settings, host=host, port=port, is_public=is_public)
    configure_logging(settings.logging.format)
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
    try:
        listening = bind(server)
    except OSError as exc:
        print(f"tally: {address_problem(server, exc)}", file=sys.stderr)
        return 2
    with listening:
        return _serve(settings, listening, listen, workers)


def _serve(
    settings: Settings, listening: socket.socket, listen: Mapping[str, object], workers: int
) -> int:
    from backend.composition.build import check_settings

    if workers > settings.database.processes:  # the pool budget counts this host's workers
        database = settings.database.model_copy(update={"processes": workers})
        settings = settings.model_copy(update={"database": database})
    log.info("checking %s: every tenant's model, tools and templates", settings.source)
    asyncio.run(check_settings(settings))
    open_files = raise_open_files_limit()  # workers inherit it
    port = listening.getsockname()[1]
    where = f"http://{_url_host(settings.server.host)}:{port}"
    driver = settings.database.url.split("://")[0]
    if workers == 1:
        announce = f"serving on {where} (database {driver}, {open_files} open files)"
        return _one_process(settings, listening, lambda: log.info(announce))
    _prepare_workers(settings, listen)
    announce = f"serving on {where} with {workers} workers (database {driver})"
    return _workers(settings, listening, workers, lambda: log.info(announce))


def _options(settings: Settings) -> dict[str, Any]:
    from backend.app import uvicorn_options

    return {
        "host": settings.server.host,
        "port": settings.server.port,
        "log_level": "info",
        "access_log": False,
        "log_config": log_config(settings.logging.format),
        **uvicorn_options(settings),
    }


def _one_process(settings: Settings, listening: socket.socket, announce: Callable[[], None]) -> int:
    import uvicorn

    from backend.app import create_app

    class Server(uvicorn.Server):
        async def startup(self, sockets: list[socket.socket] | None = None) -> None:
            await super().startup(sockets)
            if self.started:
                announce()

    server = Server(uvicorn.Config(create_app(settings, is_served=True), **_options(settings)))
    server.run(sockets=[listening])
    return 0 if server.started else 1


def _workers(
    settings: Settings, listening: socket.socket, workers: int, announce: Callable[[], None]
) -> int:
    import uvicorn
    from uvicorn.supervisors import Multiprocess

    class Supervisor(Multiprocess):
        def init_processes(self) -> None:
            """Start the workers, and say "serving" once each has started its app (a signal
            meanwhile is handled; a worker that died is left to the supervision loop)."""
            super().init_processes()
            deadline = time.monotonic() + WORKER_READY_S
            while not self.should_exit.is_set() and time.monotonic() < deadline:
                self.handle_signals()
                if not all(p.process.is_alive() for p in self.processes):
                    return
                if all(p.is_ready(timeout=1) for p in self.processes):
                    announce()
                    return
                time.sleep(0.1)

    config = uvicorn.Config(
        "backend.app:app_from_environment",
        factory=True,
        workers=workers,
        timeout_worker_healthcheck=WORKER_HEALTHCHECK_S,
        **_options(settings),
    )
    Supervisor(config, sockets=[listening]).run()
    return 0


def bind(server: ServerSettings) -> socket.socket:
    """The listening address, taken now (not yet accepting): a clash is found before the
    checks, and the port chosen for `--port 0` is known when it is announced."""
    family = socket.AF_INET6 if ":" in server.host else socket.AF_INET
    # IPPROTO_TCP named, not left 0: asyncio turns Nagle off (TCP_NODELAY) only on connections
    # whose socket says TCP, and with Nagle on a response written in two parts waited 40 ms
    # for the client's delayed ACK (every request of a client that does not send at once).
    listening = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        listening.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listening.bind((server.host, server.port))
    except OSError:
        listening.close()
        raise
    listening.set_inheritable(True)  # the workers accept on it
    return listening


def address_problem(server: ServerSettings, exc: OSError) -> str:
    """Why the address cannot be taken, and what to do, in the user's terms."""
    where = f"{server.host}:{server.port}"
    if exc.errno == errno.EADDRINUSE:
        return (
            f"port {server.port} is in use on {server.host} (another Tally, or another program,"
            f" listens there): stop it, or choose another port with --port (make run PORT=...),"
            " or server.port in the config"
        )
    if exc.errno == errno.EACCES:
        return (
            f"not allowed to listen on {where}: ports below 1024 need privileges; choose "
            "another with --port"
        )
    if exc.errno == errno.EADDRNOTAVAIL:
        return f"{server.host} is not an address of this machine: choose another with --host"
    return f"cannot listen on {where}: {exc.strerror or exc}"


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


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
    from backend.metrics.registry import MULTIPROCESS_ENV

    if Path(settings.source).is_file():  # else the built-in defaults, in every worker too
        os.environ["TALLY_CONFIG"] = settings.source
    os.environ[LISTEN_ENV] = json.dumps(listen)
    folder = Path(settings.data_dir) / "metrics"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    os.environ[MULTIPROCESS_ENV] = str(folder)
