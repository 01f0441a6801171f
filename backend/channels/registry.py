"""Channel kinds as a table: a bot's `kind` names the class that runs it. Platform SDKs are
imported inside the factories, so a deployment without bots never loads them."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from backend.channels.base import Channel
from backend.channels.context import ChannelServices
from backend.settings.channels import ChannelSettings, DingTalkRobotSettings, TelegramBotSettings

ChannelFactory = Callable[[str, str, ChannelSettings, ChannelServices], Channel]


def _telegram(
    tenant_id: str, name: str, settings: ChannelSettings, services: ChannelServices
) -> Channel:
    from backend.channels.telegram.channel import TelegramChannel

    assert isinstance(settings, TelegramBotSettings)
    return TelegramChannel(tenant_id=tenant_id, name=name, settings=settings, services=services)


async def _telegram_whoami(settings: ChannelSettings) -> str:
    from backend.channels.telegram.probe import whoami

    assert isinstance(settings, TelegramBotSettings)
    return await whoami(settings)


def _dingtalk(
    tenant_id: str, name: str, settings: ChannelSettings, services: ChannelServices
) -> Channel:
    from backend.channels.dingtalk.channel import DingTalkChannel

    assert isinstance(settings, DingTalkRobotSettings)
    return DingTalkChannel(tenant_id=tenant_id, name=name, settings=settings, services=services)


async def _dingtalk_whoami(settings: ChannelSettings) -> str:
    from backend.channels.dingtalk.probe import whoami

    assert isinstance(settings, DingTalkRobotSettings)
    return await whoami(settings)


CHANNEL_KINDS: dict[str, ChannelFactory] = {"telegram": _telegram, "dingtalk": _dingtalk}
# How `tally doctor` asks a platform who a bot is: a short description, or OSError/ValueError.
WHOAMI: dict[str, Callable[[ChannelSettings], Awaitable[str]]] = {
    "telegram": _telegram_whoami,
    "dingtalk": _dingtalk_whoami,
}


def build_channel(
    tenant_id: str, name: str, settings: ChannelSettings, services: ChannelServices
) -> Channel:
    return CHANNEL_KINDS[settings.kind](tenant_id, name, settings, services)
