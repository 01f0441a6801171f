"""Chat platforms as a table, one row per platform: a bot's `kind` names its row. Every platform
is a package of the same shape (docs/adding-a-platform.md): its bots' class in `channel.py`,
`tally doctor`'s look in `probe.py` (`whoami`). Both are imported when first used, so a
deployment without bots never loads a platform's SDK.

This table is the one list of platforms: the domain knows only Tally's own entry points
(`domain/inbound.py`), and every other channel is a platform of this table.
"""

from __future__ import annotations

import importlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import cast

from pydantic import BaseModel

from backend.channels.base import Channel
from backend.channels.context import ChannelServices
from backend.settings.channels import ChannelSettings, DingTalkRobotSettings, TelegramBotSettings
from backend.settings.channels_discord import DiscordSettings
from backend.settings.channels_feishu import FeishuSettings
from backend.settings.channels_qq import QQSettings
from backend.settings.channels_slack import SlackSettings
from backend.settings.channels_wecom import WeComSettings


@dataclass(frozen=True, slots=True)
class Platform:
    package: str  # backend.channels.<kind>
    channel_class: str  # the bots' class in the package's channel.py
    settings: type[BaseModel]  # what a bot of the platform is set up with (its `kind` is the key)


PLATFORMS: dict[str, Platform] = {
    "telegram": Platform("backend.channels.telegram", "TelegramChannel", TelegramBotSettings),
    "dingtalk": Platform("backend.channels.dingtalk", "DingTalkChannel", DingTalkRobotSettings),
    "qq": Platform("backend.channels.qq", "QQChannel", QQSettings),
    "discord": Platform("backend.channels.discord", "DiscordChannel", DiscordSettings),
    "slack": Platform("backend.channels.slack", "SlackChannel", SlackSettings),
    "wecom": Platform("backend.channels.wecom", "WeComChannel", WeComSettings),
    "feishu": Platform("backend.channels.feishu", "FeishuChannel", FeishuSettings),
}


def build_channel(
    tenant_id: str, name: str, settings: ChannelSettings, services: ChannelServices
) -> Channel:
    """A bot of `settings.kind`, not started."""
    platform = _platform_of(settings)
    module = importlib.import_module(f"{platform.package}.channel")
    channel_class = cast(Callable[..., Channel], getattr(module, platform.channel_class))
    return channel_class(tenant_id=tenant_id, name=name, settings=settings, services=services)


async def whoami(settings: ChannelSettings) -> str:
    """How `tally doctor` asks a platform who a bot is: a short description, or OSError /
    ValueError saying why the platform would not answer."""
    module = importlib.import_module(f"{_platform_of(settings).package}.probe")
    ask = cast(Callable[[ChannelSettings], Awaitable[str]], module.whoami)
    return await ask(settings)


def _platform_of(settings: ChannelSettings) -> Platform:
    platform = PLATFORMS[settings.kind]
    assert isinstance(settings, platform.settings)
    return platform
