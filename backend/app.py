"""The web application: the API routers and the bundled page over the composed services."""

from __future__ import annotations

import logging
import os
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager

from fastapi import FastAPI
from fastapi.staticfiles import StaticFiles

from backend.api import admin, chat, health, memory, metrics, openai_compat, sessions, usage
from backend.api.errors import install_error_handlers
from backend.api.limits import BodySizeLimit
from backend.composition import ADMIN_KEY_ENV, build_services
from backend.providers.base import ChatProvider
from backend.resources import frontend_dir
from backend.settings import Settings
from backend.tools.base import Tool

log = logging.getLogger("tally")

DEFAULT_TENANT = "default"
FRONTEND = frontend_dir()


def create_app(
    settings: Settings,
    *,
    extra_tools: Iterable[Tool] = (),
    provider: ChatProvider | None = None,
    summarizer_provider: ChatProvider | None = None,
) -> FastAPI:
    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with build_services(
            settings,
            extra_tools=extra_tools,
            provider=provider,
            summarizer_provider=summarizer_provider,
        ) as services:
            app.state.services = services
            runtime = await services.runtimes.get(DEFAULT_TENANT)
            if runtime.is_demo:
                log.warning(
                    "demo mode: no LLM key is set (%s); the built-in demo provider answers,"
                    " with a window of %s messages so memory shows within a dozen turns",
                    runtime.demo_key_env or "no model configured",
                    runtime.settings.persona.max_history_messages,
                )
            if settings.auth.mode == "keys" and not os.environ.get(ADMIN_KEY_ENV):
                log.warning(
                    "%s is not set: no operator key; create tenant keys with `tally keys`",
                    ADMIN_KEY_ENV,
                )
            yield

    app = FastAPI(title="Tally", version="0.1.0", lifespan=lifespan)
    install_error_handlers(app)
    app.add_middleware(BodySizeLimit, max_bytes=settings.server.max_body_bytes)
    routers = (health, sessions, chat, memory, admin, usage, metrics, openai_compat)
    for module in routers:
        app.include_router(module.router)
    if FRONTEND.is_dir():
        app.mount("/", StaticFiles(directory=FRONTEND, html=True), name="frontend")
    return app
