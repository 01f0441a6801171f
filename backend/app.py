"""The web application: the API routers and the bundled page over the composed services."""

from __future__ import annotations

import gc
import json
import logging
import os
from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import asynccontextmanager
from datetime import datetime
from typing import Any

from fastapi import FastAPI
from fastapi.staticfiles import StaticFiles

from backend.api import (
    admin,
    admin_bots,
    channels,
    chat,
    docs,
    health,
    memory,
    memory_console,
    memory_proposals,
    metrics,
    openai_compat,
    operations,
    people,
    sessions,
    tenant_settings,
    usage,
)
from backend.api.errors import install_error_handlers
from backend.api.json_response import StorableJSONResponse
from backend.api.limits import BodySizeLimit
from backend.api.request_head import ANY_HOST, LOOPBACK_HOSTS, HostPolicy, RequestHeadCheck
from backend.api.turn_relay import TurnRelays
from backend.channels.bot_runner import run_bots
from backend.composition.build import ADMIN_KEY_ENV, build_services
from backend.domain.clock import utc_now
from backend.domain.tenants import DEFAULT_TENANT
from backend.host.heap import give_back_free_memory
from backend.host.shipped_files import frontend_dir
from backend.metrics.registry import process_stopped
from backend.operations.runner import AdminOperations
from backend.providers.base import ChatProvider
from backend.settings import Settings, load_settings
from backend.tools.base import Tool

log = logging.getLogger("tally")

FRONTEND = frontend_dir()
# The HTTP parser's bound on a header block still arriving; the request line and line ends
# come on top of the headers that RequestHeadCheck counts.
REQUEST_LINE_ALLOWANCE = 16 * 1024
# An idle connection is kept longer than the clients and proxies in front keep theirs to reuse
# (httpx 5 s, also uvicorn's own default; nginx upstreams 60 s): with equal times, a request sent on
# a connection in the instant the server closes it failed with a read error.
KEEP_ALIVE_S = 75
# `tally serve --workers` tells its workers the address it was given (host, port, is_public).
LISTEN_ENV = "TALLY_LISTEN"


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


def app_from_environment() -> FastAPI:
    """The app for a worker process of an ASGI server (`uvicorn --factory
    backend.app:app_from_environment`, and `tally serve --workers`): the config `TALLY_CONFIG`
    names (else config.yaml here, else the defaults), at the address in `TALLY_LISTEN`."""
    listen = json.loads(os.environ.get(LISTEN_ENV) or "{}")
    settings = listening_settings(
        load_settings(),
        host=listen.get("host"),
        port=listen.get("port"),
        is_public=bool(listen.get("is_public")),
    )
    return create_app(settings, is_served=True)


def uvicorn_options(settings: Settings) -> dict[str, Any]:
    """What `tally serve` (and the tests' server) pass to uvicorn besides the app and address.

    h11 is named rather than left to uvicorn's choice (httptools when installed), since the
    header block bound is h11's."""
    return {
        "http": "h11",
        "h11_max_incomplete_event_size": settings.server.max_header_bytes + REQUEST_LINE_ALLOWANCE,
        "timeout_keep_alive": KEEP_ALIVE_S,
    }


def host_policy(settings: Settings) -> HostPolicy:
    """`server.allowed_hosts`, by default the loopback names with auth.mode none (against DNS
    rebinding) and any host with keys."""
    allowed = settings.server.allowed_hosts
    if allowed is None:
        allowed = list(LOOPBACK_HOSTS) if settings.auth.mode == "none" else [ANY_HOST]
    return HostPolicy(allowed)


def is_public_docs(settings: Settings) -> bool:
    if settings.server.public_docs is not None:
        return settings.server.public_docs
    return settings.auth.mode == "none"


def create_app(
    settings: Settings,
    *,
    extra_tools: Iterable[Tool] = (),
    provider: ChatProvider | None = None,
    summarizer_provider: ChatProvider | None = None,
    clock: Callable[[], datetime] = utc_now,
    is_served: bool = False,
) -> FastAPI:
    """The app; `is_served` for the process of `tally serve` or one of its workers, which
    serves it until stopped."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with (
            build_services(
                settings,
                extra_tools=extra_tools,
                provider=provider,
                summarizer_provider=summarizer_provider,
                clock=clock,
            ) as services,
            run_bots(services) as channels,
        ):
            app.state.services = services
            app.state.channels = channels
            app.state.operations = operations = AdminOperations(services)
            app.state.relays = relays = TurnRelays(
                services.coordinator.journal,
                resume_s=settings.server.sse_resume_s,
                is_shared=services.coordinator.kind == "redis",
            )
            runtime = await services.runtimes.get(DEFAULT_TENANT)
            if runtime.is_demo:
                log.warning(
                    "demo mode: the built-in demo provider answers, with a window of %s"
                    " messages so memory shows within a dozen turns; to talk to a real model, %s",
                    runtime.settings.persona.max_history_messages,
                    runtime.demo_hint,
                )
            if settings.auth.mode == "keys" and not os.environ.get(ADMIN_KEY_ENV):
                log.warning(
                    "%s is not set: no operator key; create tenant keys with `tally keys`",
                    ADMIN_KEY_ENV,
                )
            if is_served:
                await services.embedders.load()  # the default tenant's, named above
                # What starting built (modules, settings, clients) lives as long as the
                # process: collected once (the garbage given back to the system), then
                # frozen, full collections no longer walk it.
                give_back_free_memory()
                gc.freeze()
            try:
                yield
            finally:
                await operations.aclose()
                await relays.aclose()
                process_stopped()

    is_public = is_public_docs(settings)
    app = FastAPI(
        title="Tally",
        version="0.1.0",
        lifespan=lifespan,
        openapi_url="/openapi.json" if is_public else None,
        docs_url="/docs" if is_public else None,
        redoc_url="/redoc" if is_public else None,
        default_response_class=StorableJSONResponse,
    )
    app.state.settings = settings
    install_error_handlers(app)
    _install_routes(app, settings)
    return app


def _install_routes(app: FastAPI, settings: Settings) -> None:
    app.add_middleware(BodySizeLimit, max_bytes=settings.server.max_body_bytes)
    app.add_middleware(  # added last, so it runs first: before the body is read
        RequestHeadCheck,
        hosts=host_policy(settings),
        max_headers=settings.server.max_headers,
        max_header_bytes=settings.server.max_header_bytes,
    )
    routers = (
        health,
        sessions,
        chat,
        memory,
        memory_proposals,
        people,
        admin,
        admin_bots,
        tenant_settings,
        memory_console,
        operations,
        usage,
        metrics,
        openai_compat,
        channels,
    )
    for module in routers:
        app.include_router(module.router)
    if not is_public_docs(settings):
        app.include_router(docs.router)
    if FRONTEND.is_dir():
        app.mount("/", StaticFiles(directory=FRONTEND, html=True), name="frontend")
