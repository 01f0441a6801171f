"""Channel kinds as a table: a bot's `kind` names the class that runs it. Platform SDKs are
imported inside the factories, so a deployment without bots never loads them."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from backend.channel_settings import ChannelSettings
from backend.channels.base import Channel
from backend.channels.context import ChannelServices

ChannelFactory = Callable[[str, str, ChannelSettings, ChannelServices], Channel]


def _telegram(
    tenant_id: str, name: str, settings: ChannelSettings, services: ChannelServices
) -> Channel:
    from backend.channels.telegram.channel import TelegramChannel

    return TelegramChannel(tenant_id=tenant_id, name=name, settings=settings, services=services)


async def _telegram_whoami(settings: ChannelSettings) -> str:
    from backend.channels.telegram.probe import whoami

    return await whoami(settings)


CHANNEL_KINDS: dict[str, ChannelFactory] = {"telegram": _telegram}
# How `tally doctor` asks a platform who a bot is: a short description, or OSError/ValueError.
WHOAMI: dict[str, Callable[[ChannelSettings], Awaitable[str]]] = {"telegram": _telegram_whoami}


def build_channel(
    tenant_id: str, name: str, settings: ChannelSettings, services: ChannelServices
) -> Channel:
    return CHANNEL_KINDS[settings.kind](tenant_id, name, settings, services)
