"""Reading Discord's dispatches: any JSON value in any field of a real MESSAGE_CREATE or
INTERACTION_CREATE either reads or is a `RefusedUpdate` (recorded as refused), never another
error; and the bot's own mention is taken out of the text it is asked. (Discord delivers over
the gateway only, so its webhook route refuses every body: test_discord.py.)"""

from __future__ import annotations

from typing import Any

import hypothesis
from hypothesis import strategies as st

from backend.channels.commands import Ask, Command
from backend.channels.discord.inbound import DiscordMessage, Press, parse, read_message
from backend.channels.platform_body import RefusedUpdate, checked_update
from backend.settings.channels_discord import DiscordSettings
from tests.fakes.discord_server import FakeDiscordServer
from tests.fuzz.test_channel_body_fuzz import ANY_JSON, paths_of, replaced

FAKE = FakeDiscordServer()  # not started: only its payload builders are used
MESSAGE = {"t": "MESSAGE_CREATE", "d": FAKE.message("hi", guild_id="700")}
PRESS = {"t": "INTERACTION_CREATE", "d": FAKE.press("501:forget:abc", guild_id="700")}
SETTINGS = DiscordSettings(kind="discord", token_env="T", allow_from=["*"])
BOT = "800000000000000001"


def read(payload: dict[str, Any]) -> DiscordMessage | Press | None:
    try:
        return parse(checked_update(payload))
    except RefusedUpdate:
        return None


@hypothesis.settings(max_examples=300, deadline=None, database=None, derandomize=True)
@hypothesis.given(data=st.data(), value=ANY_JSON)
def test_any_value_in_any_field_reads_or_is_refused(data: st.DataObject, value: object) -> None:
    update = data.draw(st.sampled_from([MESSAGE, PRESS]))
    path = data.draw(st.sampled_from(paths_of(update)))
    read(replaced(update, path, value))  # raises nothing but RefusedUpdate, caught there


def test_a_real_message_and_press_read() -> None:
    message = parse(MESSAGE)
    press = parse(PRESS)
    assert isinstance(message, DiscordMessage) and message.is_group
    assert isinstance(press, Press) and press.custom_id == "501:forget:abc"


def test_the_bots_mention_is_taken_out_and_commands_read() -> None:
    mentioned = FAKE.message(f"<@{BOT}> hello <@!{BOT}>", guild_id="7", mentions=[{"id": BOT}])
    command = FAKE.message(f"<@{BOT}> /Forget 2", guild_id="7", mentions=[{"id": BOT}])
    unaddressed = FAKE.message("hello all", guild_id="7")
    asked = [
        read_message(m, SETTINGS, bot_id=BOT)
        for m in (_parsed(mentioned), _parsed(command), _parsed(unaddressed))
    ]
    assert asked == [Ask("hello"), Command("forget", "2"), None]


def _parsed(data: dict[str, Any]) -> DiscordMessage:
    message = parse({"t": "MESSAGE_CREATE", "d": data})
    assert isinstance(message, DiscordMessage)
    return message


def test_the_package_named_discord_does_not_shadow_the_sdk() -> None:
    """`backend/channels/discord/` imports discord.py by absolute import: the SDK, not itself."""
    from backend.channels.discord import sdk

    assert "site-packages" in (sdk.discord.__file__ or "")
    assert sdk.discord.__version__ == "2.7.1" and hasattr(sdk.discord, "Client")
