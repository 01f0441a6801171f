"""The table of chat platforms is the one list of them: every platform has a row, a package of
the same shape, its settings and no name of its own in the domain."""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import get_args

import pytest
import yaml

from backend.api.openai_compat import CHANNEL as OPENAI_CHANNEL
from backend.api.schemas import SessionCreate
from backend.channels.bot import PlatformBot
from backend.channels.registry import PLATFORMS
from backend.domain.inbound import ENTRY_POINTS, is_chat_platform, origin_of
from backend.settings import parse_settings
from backend.settings.channels import ChannelSettings
from tests.conftest import ROOT

# The files every platform package has, each with the same role (docs/adding-a-platform.md).
PLATFORM_FILES = ("__init__.py", "channel.py", "inbound.py", "outbound.py", "format.py", "probe.py")


@pytest.mark.parametrize("kind", sorted(PLATFORMS))
def test_every_platform_is_a_package_of_the_same_shape(kind: str) -> None:
    platform = PLATFORMS[kind]
    assert platform.package == f"backend.channels.{kind}"
    folder = Path(importlib.import_module(platform.package).__file__ or "").parent
    assert [name for name in PLATFORM_FILES if not (folder / name).is_file()] == []
    channel_class = getattr(
        importlib.import_module(f"{platform.package}.channel"), platform.channel_class
    )
    assert issubclass(channel_class, PlatformBot)
    assert channel_class.KIND == kind
    assert callable(importlib.import_module(f"{platform.package}.probe").whoami)


def test_every_platform_has_its_settings_and_every_kind_of_settings_a_platform() -> None:
    settings_classes = get_args(get_args(ChannelSettings)[0])
    kinds = {get_args(cls.model_fields["kind"].annotation)[0]: cls for cls in settings_classes}
    assert kinds == {kind: platform.settings for kind, platform in PLATFORMS.items()}


def test_the_domain_takes_every_platform_for_a_chat_platform_and_nothing_else() -> None:
    assert all(is_chat_platform(kind) for kind in PLATFORMS)
    assert not ENTRY_POINTS & set(PLATFORMS)
    api_channels = set(get_args(SessionCreate.model_fields["channel"].annotation))
    assert {*api_channels, OPENAI_CHANNEL} == set(ENTRY_POINTS)
    assert origin_of("telegram", "tg:42") == "telegram:tg:42"
    assert origin_of("openai", "someone") == "openai"


def test_config_yaml_shows_a_bot_of_every_platform_that_parses_as_it_stands(
    tmp_path: Path,
) -> None:
    """The commented examples under `channels:` are what an operator copies: uncommented, each
    is a valid bot of its platform."""
    text = (ROOT / "config.yaml").read_text()
    block = text[text.index("\nchannels:") : text.index("\ntenants:")].splitlines()[2:]
    examples = "\n".join(line.replace("  # ", "  ", 1) for line in block)
    raw = {"channels": yaml.safe_load(examples)}
    settings = parse_settings(raw, source="config.yaml examples", base_dir=tmp_path)
    assert {bot.kind for bot in settings.channels.values()} == set(PLATFORMS)
