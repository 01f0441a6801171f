"""`tally doctor`'s look at a WeCom app: does WeCom take its credentials (`gettoken`), and
which app is it (`agent/get`)."""

from __future__ import annotations

from backend.channels.wecom.api import WeComApi, WeComError
from backend.settings.channels_wecom import WeComSettings


async def whoami(settings: WeComSettings) -> str:
    """`app <name> (agent <id>)`, or OSError / ValueError saying why WeCom would not answer."""
    api = WeComApi(settings, attempts=1)  # doctor reports; serving retries
    try:
        agent = await api.agent()
    except WeComError as exc:
        if exc.answered:  # it answered, and refused the corp id, secret or agent id
            raise ValueError(f"{settings.api_base_url} refused the app: {exc}") from exc
        raise OSError(str(exc)) from exc
    finally:
        await api.aclose()
    name = agent.get("name") if isinstance(agent.get("name"), str) else "?"
    return f"app {name} (agent {settings.agent_id}), credentials accepted"
