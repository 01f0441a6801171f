"""The bodies a fake Discord hands out: MESSAGE_CREATE and INTERACTION_CREATE data as the real
gateway dispatches them, an attachment, and the application `/oauth2/applications/@me` answers."""

from __future__ import annotations

import itertools
from typing import Any

APPLICATION_ID = "900000000000000001"
_ids = itertools.count(1_100_000_000_000_000_000)


def snowflake() -> str:
    return str(next(_ids))


def message(
    text: str,
    *,
    channel_id: str = "300",
    guild_id: str | None = None,
    author_id: str = "501",
    author_name: str = "ada",
    mentions: list[dict[str, Any]] | None = None,
    attachments: list[dict[str, Any]] | None = None,
    message_id: str | None = None,
    bot: bool = False,
) -> dict[str, Any]:
    """A MESSAGE_CREATE's data (a direct message unless `guild_id` is given)."""
    author: dict[str, Any] = {
        "id": author_id,
        "username": author_name,
        "discriminator": "0",
        "avatar": None,
    }
    if bot:
        author["bot"] = True
    data: dict[str, Any] = {
        "id": message_id or snowflake(),
        "channel_id": channel_id,
        "author": author,
        "content": text,
        "timestamp": "2026-12-05T04:00:00.000000+00:00",
        "edited_timestamp": None,
        "tts": False,
        "mention_everyone": False,
        "mentions": mentions or [],
        "mention_roles": [],
        "attachments": attachments or [],
        "embeds": [],
        "pinned": False,
        "type": 0,
    }
    if guild_id is not None:
        data["guild_id"] = guild_id
        data["member"] = {"roles": [], "joined_at": "2026-01-01T00:00:00+00:00"}
    return data


def attachment(
    base_url: str, name: str, size: int, content_type: str = "image/png"
) -> dict[str, Any]:
    return {
        "id": snowflake(),
        "filename": name,
        "size": size,
        "url": f"{base_url}/attachments/{name}",
        "proxy_url": f"{base_url}/attachments/{name}",
        "content_type": content_type,
    }


def press(
    custom_id: str,
    *,
    user_id: str = "501",
    channel_id: str = "300",
    guild_id: str | None = None,
    message_text: str = "",
) -> dict[str, Any]:
    """An INTERACTION_CREATE's data: a button pressed (type 3)."""
    user = {"id": user_id, "username": f"user{user_id}", "discriminator": "0", "avatar": None}
    data: dict[str, Any] = {
        "id": snowflake(),
        "application_id": APPLICATION_ID,
        "type": 3,
        "token": f"interaction-token-{snowflake()}",
        "version": 1,
        "channel_id": channel_id,
        "channel": {"id": channel_id, "type": 1 if guild_id is None else 0},
        "data": {"custom_id": custom_id, "component_type": 2},
        "message": {"id": snowflake(), "channel_id": channel_id, "content": message_text},
        "attachment_size_limit": 8_388_608,
        "locale": "en-US",
    }
    if guild_id is None:
        data["user"] = user
    else:
        data["guild_id"] = guild_id
        data["member"] = {"user": user, "roles": [], "permissions": "0"}
    return data


def application(user: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": APPLICATION_ID,
        "name": user["username"],
        "description": "",
        "icon": None,
        "bot_public": False,
        "bot_require_code_grant": False,
        "owner": {"id": "1", "username": "owner", "discriminator": "0", "avatar": None},
        "verify_key": "0" * 64,
        "flags": 0,
        "summary": "",
    }
