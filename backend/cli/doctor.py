"""`tally doctor`: check the config, the database and the provider; say what to fix."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import text
from sqlalchemy.exc import SQLAlchemyError

from backend.chat.prompts import PromptRenderer
from backend.composition import choose_provider
from backend.domain.events import TextDelta
from backend.domain.requests import ChatRequest, RequestMessage
from backend.errors import TallyError
from backend.settings import Settings, load_settings
from backend.storage.database import Database
from backend.storage.migrate import migrate


def _report(name: str, problem: str | None, fix: str = "") -> bool:
    if problem is None:
        print(f"ok    {name}")
        return True
    print(f"FAIL  {name}: {problem}" + (f"\n      fix: {fix}" if fix else ""))
    return False


async def run_doctor(config: Path | None, *, is_offline: bool) -> int:
    try:
        settings = load_settings(config)
    except TallyError as exc:
        _report("config", exc.message, "correct the key named above")
        return 1
    _report("config", None)
    checks = [
        _check_prompts(settings),
        await _check_database(settings),
        await _check_provider(settings, is_offline=is_offline),
    ]
    return 0 if all(checks) else 1


def _check_prompts(settings: Settings) -> bool:
    try:
        PromptRenderer(settings.prompts_dir).check(settings.persona.system_template)
    except TallyError as exc:
        return _report("prompts", exc.message, f"put the template in {settings.prompts_dir}")
    return _report("prompts", None)


async def _check_database(settings: Settings) -> bool:
    database = Database(settings.database.url)
    try:
        await migrate(database)
        async with database.read() as conn:
            await conn.execute(text("SELECT 1"))
    except (SQLAlchemyError, OSError) as exc:
        return _report(
            "database", str(exc).splitlines()[0], "check database.url and that the server runs"
        )
    finally:
        await database.dispose()
    return _report("database", None)


async def _check_provider(settings: Settings, *, is_offline: bool) -> bool:
    provider, model, is_demo = choose_provider(settings)
    try:
        if is_demo:
            return _report(
                "provider",
                "no LLM key: the demo provider answers",
                "export the key named by api_key_env in config.yaml (e.g. OPENAI_API_KEY)",
            )
        if is_offline:
            return _report(f"provider {model.provider} (not called: --offline)", None)
        request = ChatRequest(
            model=model.name,
            system="Reply with the single word: ok",
            messages=(RequestMessage(role="user", content="ping"),),
            max_output_tokens=5,
        )
        async for event in provider.stream(request):
            if isinstance(event, TextDelta):
                break
    except TallyError as exc:
        return _report(
            f"provider {model.provider}", exc.message, "check base_url, the key and the model"
        )
    finally:
        await provider.aclose()
    return _report(f"provider {model.provider} ({model.name})", None)
