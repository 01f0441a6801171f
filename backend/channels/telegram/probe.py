"""`tally doctor`'s look at a Telegram bot: does Telegram take its token, and as which bot."""

from __future__ import annotations

from telegram import Bot
from telegram.error import NetworkError, TelegramError
from telegram.request import HTTPXRequest

from backend.settings.channels import TelegramBotSettings

PROBE_TIMEOUT_S = 10.0


async def whoami(settings: TelegramBotSettings) -> str:
    """`@username (mode)`, or OSError / ValueError saying why Telegram would not answer."""
    api = settings.api_base_url.rstrip("/")
    request = HTTPXRequest(connect_timeout=PROBE_TIMEOUT_S, read_timeout=PROBE_TIMEOUT_S)
    bot = Bot(settings.token() or "", base_url=f"{api}/bot", request=request)
    try:
        me = await bot.get_me()
    except NetworkError as exc:  # timeouts too
        raise OSError(f"cannot reach {api}: {exc}") from exc
    except TelegramError as exc:  # InvalidToken, Unauthorized
        raise ValueError(f"{api} refused the token: {exc}") from exc
    finally:
        await request.shutdown()
    return f"@{me.username} ({settings.mode})"
