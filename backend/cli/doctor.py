"""`tally doctor`: check the config, the prompts, the database and the provider; say what to fix.

Every line is `ok`, `WARN` (works, but not as a deployment should: the demo) or `FAIL` (serving
would refuse or break), with the fix under it. The exit code is 1 when anything failed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from sqlalchemy import text
from sqlalchemy.exc import SQLAlchemyError

from backend.channel_settings import ChannelSettings
from backend.channels.bot_runner import bot_key_path
from backend.channels.registry import WHOAMI
from backend.composition import check_settings
from backend.domain.events import TextDelta
from backend.domain.requests import ChatRequest, RequestMessage
from backend.errors import TallyError
from backend.model_choice import choose_provider
from backend.providers.base import ChatProvider
from backend.settings import Settings, load_settings
from backend.storage.database import open_database
from backend.storage.migrate import migrate

Outcome = Literal["ok", "WARN", "FAIL"]


def _report(outcome: Outcome, name: str, detail: str = "", fix: str = "") -> bool:
    line = f"{outcome:<5} {name}" + (f": {detail}" if detail else "")
    print(line + (f"\n      fix: {fix}" if fix else ""))
    return outcome != "FAIL"


async def run_doctor(config: Path | None, *, is_offline: bool) -> int:
    try:
        settings = load_settings(config)
        bots = await check_settings(settings)
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
            wanted = choice.missing_key_env or "the key your provider names in api_key_env"
            return _report(
                "WARN",
                "provider",
                "demo mode: no LLM key is set, so the built-in demo provider answers",
                f"export {wanted} (or edit providers and model in {settings.source}), restart",
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
        description = await WHOAMI[bot.kind](bot)
    except (OSError, ValueError) as exc:
        return _report("FAIL", f"bot {where}", str(exc), bot.where_to_look())
    return _report("ok", f"bot {where}", description)


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
