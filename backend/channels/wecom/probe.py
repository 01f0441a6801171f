"""`tally doctor`'s look at a WeCom bot. An app: does WeCom take its credentials (`gettoken`),
and which app is it (`agent/get`). A robot: what WeCom answers its subscription on the long
connection."""

from __future__ import annotations

from backend.channels.wecom.api import WeComApi, WeComError
from backend.settings.channels_wecom import WeComSettings


async def whoami(settings: WeComSettings) -> str:
    """`app <name> (agent <id>)`, or OSError / ValueError saying why WeCom would not answer."""
    if settings.mode == "robot":
        from backend.channels.wecom.robot import subscribe_once  # its SDK only for a robot

        return await subscribe_once(settings)
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
