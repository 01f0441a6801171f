"""`tally doctor`'s look at a DingTalk robot: does DingTalk take the app's credentials."""

from __future__ import annotations

from backend.channels.dingtalk.openapi import DingTalkApi, DingTalkError
from backend.settings.channels import DingTalkRobotSettings


async def whoami(settings: DingTalkRobotSettings) -> str:
    """`robot <code> (mode)`, or OSError / ValueError saying why DingTalk would not answer."""
    api = DingTalkApi(settings, attempts=1)  # doctor reports; serving retries
    try:
        await api.access_token()
    except DingTalkError as exc:
        if exc.status:  # it answered, and refused the client id or secret
            raise ValueError(f"{settings.openapi_base_url} refused the credentials: {exc}") from exc
        raise OSError(str(exc)) from exc  # "cannot reach <host>: ..." or a timeout
    finally:
        await api.aclose()
    return f"robot {settings.robot()} ({settings.mode}), credentials accepted"
