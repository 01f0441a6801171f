"""`tally doctor`: check the config, the prompts, the database, the provider, the bots and the MCP
servers; say what to fix.

Every line is `ok`, `WARN` (works, but not as a deployment should: the demo) or `FAIL` (serving
would refuse or break), with the fix under it. The exit code is 1 when anything failed.
"""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path
from typing import Literal

from sqlalchemy import text
from sqlalchemy.exc import SQLAlchemyError

from backend.channels.registry import whoami
from backend.composition.build import check_settings, complete_config_error
from backend.composition.model_choice import choose_provider
from backend.domain.events import TextDelta
from backend.domain.requests import ChatRequest, RequestMessage
from backend.errors import ConfigError, TallyError
from backend.providers.base import ChatProvider
from backend.settings import Settings, load_settings, tenant_settings
from backend.settings.channels import ChannelSettings, bot_key_path
from backend.settings.tools import McpServerSettings
from backend.storage.database import open_database
from backend.storage.migrate import migrate
from backend.tools.mcp_connection import McpConnection
from backend.tools.mcp_shapes import PING_EVERY_S

Outcome = Literal["ok", "WARN", "FAIL"]


def _report(outcome: Outcome, name: str, detail: str = "", fix: str = "") -> bool:
    line = f"{outcome:<5} {name}" + (f": {detail}" if detail else "")
    print(line + (f"\n      fix: {fix}" if fix else ""))
    return outcome != "FAIL"


async def run_doctor(config: Path | None, *, is_offline: bool) -> int:
    try:
        settings = load_settings(config)
        bots = await check_settings(settings)
    except ConfigError as exc:
        complete = await complete_config_error(exc)  # every problem, in one report
        _report("FAIL", "config", complete.message, "correct the keys named above")
        return 1
    except TallyError as exc:
        _report("FAIL", "config", exc.message, "correct the key named above")
        return 1
    _report("ok", "config", settings.source)
    _report("ok", "prompts", f"the system and summary templates render ({settings.prompts_dir})")
    checks = [
        await _check_database(settings),
        await _check_provider(settings, is_offline=is_offline),
        *[
            await _check_bot(bot_key_path(tenant_id, name), bot, is_offline=is_offline)
            for tenant_id, name, bot in bots
        ],
        *[
            await _check_mcp_server(where, server, is_offline=is_offline)
            for where, server in _mcp_servers(settings)
        ],
    ]
    return 0 if all(checks) else 1


async def _check_database(settings: Settings) -> bool:
    database = open_database(settings.database)
    try:
        await migrate(database)
        async with database.read() as conn:
            await conn.execute(text("SELECT 1"))
    except (SQLAlchemyError, OSError) as exc:
        return _report(
            "FAIL",
            "database",
            str(exc).splitlines()[0],
            "check database.url and that the server runs",
        )
    finally:
        await database.dispose()
    return _report("ok", "database", settings.database.url.split("://")[0])


async def _check_provider(settings: Settings, *, is_offline: bool) -> bool:
    provider, choice = choose_provider(settings)
    model = choice.model
    try:
        if choice.is_demo:
            return _report(
                "WARN",
                "provider",
                "demo mode: no LLM key is set, so the built-in demo provider answers",
                choice.hint or "",
            )
        if is_offline:
            return _report("ok", f"provider {model.provider}", "not called (--offline)")
        await _ping(provider, model.name)
    except TallyError as exc:
        # The message names the provider, its URL and the cause.
        return _report("FAIL", "provider", exc.message, "check base_url, the key and the model")
    finally:
        await provider.aclose()
    return _report("ok", f"provider {model.provider}", f"{model.name} answered")


async def _check_bot(where: str, bot: ChannelSettings, *, is_offline: bool) -> bool:
    if is_offline:
        return _report("ok", f"bot {where}", "not called (--offline)")
    try:
        description = await whoami(bot)
    except (OSError, ValueError) as exc:
        return _report("FAIL", f"bot {where}", str(exc), bot.where_to_look())
    return _report("ok", f"bot {where}", description)


def _mcp_servers(settings: Settings) -> list[tuple[str, McpServerSettings]]:
    """Each MCP server the file sets up, by the key path that sets it."""
    servers = [(f"tools.mcp_servers.{n}", s) for n, s in settings.tools.mcp_servers.items()]
    for tenant_id, overrides in settings.tenants.items():
        own = (overrides.get("tools") or {}).get("mcp_servers") or {}
        effective = tenant_settings(settings, tenant_id, overrides, is_from_file=True)
        servers += [
            (f"tenants.{tenant_id}.tools.mcp_servers.{name}", effective.tools.mcp_servers[name])
            for name in own
        ]
    return servers


async def _check_mcp_server(where: str, server: McpServerSettings, *, is_offline: bool) -> bool:
    if is_offline:
        return _report("ok", f"MCP server {where}", "not started (--offline)")
    connection = McpConnection(where, server, tenant_id="doctor", ping_every_s=PING_EVERY_S)
    try:
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(server.connect_timeout_s + 5):
                await connection.first_attempt()
        is_up = connection.is_connected
    finally:
        await connection.aclose()
    if not is_up:
        fix = "check its command and env" if server.command else "check its url and headers"
        problem = connection.problem or "no answer in time"
        return _report("FAIL", f"MCP server {where}", problem, fix)
    return _report("ok", f"MCP server {where}", f"{len(connection.tools)} tools")


async def _ping(provider: ChatProvider, model: str) -> None:
    request = ChatRequest(
        model=model,
        system="Reply with the single word: ok",
        messages=(RequestMessage(role="user", content="ping"),),
        max_output_tokens=5,
    )
    async for event in provider.stream(request):
        if isinstance(event, TextDelta):
            break
