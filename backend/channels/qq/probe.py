"""`tally doctor`'s look at a QQ bot: does QQ take the app's credentials, and who is the bot."""

from __future__ import annotations

from backend.channels.qq.openapi import QQApi, QQError
from backend.settings.channels_qq import QQSettings


async def whoami(settings: QQSettings) -> str:
    """`<username> (app <id>, mode)`, or OSError / ValueError saying why QQ would not answer."""
    api = QQApi(settings, attempts=1)  # doctor reports; serving retries
    try:
        me = await api.me()  # gets a token first: both the credentials and the API are checked
    except QQError as exc:
        if exc.status:  # it answered, and refused the app id or secret
            raise ValueError(f"QQ refused the credentials of app {settings.app_id}: {exc}") from exc
        raise OSError(str(exc)) from exc  # "cannot reach <host>: ..." or a timeout
    finally:
        await api.aclose()
    name = me.get("username") or me.get("id") or "?"
    return f"{name} (app {settings.app_id}, {settings.mode}), credentials accepted"
