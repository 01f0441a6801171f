"""`tally doctor`'s look at a Feishu bot: Feishu's own answer to who the bot is."""

from __future__ import annotations

from backend.channels.feishu.openapi import FeishuApi, FeishuError
from backend.settings.channels_feishu import FeishuSettings


async def whoami(settings: FeishuSettings) -> str:
    """`bot <name> (<open id>, mode)`, or OSError / ValueError saying why Feishu would not."""
    api = FeishuApi(settings, attempts=1)  # doctor reports; serving retries
    try:
        bot = await api.bot_info()
    except FeishuError as exc:
        if exc.status or exc.code:  # it answered, and refused the app id or secret
            raise ValueError(f"{settings.api_base()} refused the app: {exc}") from exc
        raise OSError(str(exc)) from exc  # "cannot reach <host>: ..." or a timeout
    finally:
        await api.aclose()
    return f"bot {bot.get('app_name', '?')} ({bot['open_id']}, {settings.mode})"
