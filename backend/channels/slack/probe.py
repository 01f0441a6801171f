"""`tally doctor`'s look at a Slack bot: does Slack take its bot token (`auth.test`)."""

from __future__ import annotations

from backend.channels.slack.api import SlackApi, SlackError
from backend.settings.channels_slack import SlackSettings


async def whoami(settings: SlackSettings) -> str:
    """`@<bot> in <team> (mode)`, or OSError / ValueError saying why Slack would not answer."""
    api = SlackApi(settings)
    try:
        me = await api.auth_test()
    except SlackError as exc:
        if exc.status:  # it answered, and refused the token
            raise ValueError(f"{settings.api_base_url} refused the bot token: {exc}") from exc
        raise OSError(str(exc)) from exc
    return f"@{me.get('user', '?')} in {me.get('team', '?')} ({settings.mode})"
