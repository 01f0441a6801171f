"""`tally doctor`'s look at a Discord bot: does Discord take its token (GET /users/@me)."""

from __future__ import annotations

import asyncio

import aiohttp

from backend.channels.discord.gateway import point_at
from backend.channels.discord.sdk import discord
from backend.settings.channels_discord import DiscordSettings


async def whoami(settings: DiscordSettings) -> str:
    """`@<username> (id <id>)`, or OSError / ValueError saying why Discord would not answer."""
    point_at(settings)
    http = discord.http.HTTPClient(asyncio.get_running_loop())
    try:
        user = await http.static_login(settings.token() or "")
    except discord.LoginFailure as exc:
        raise ValueError(f"{settings.api_base_url} refused the token: {exc}") from exc
    except discord.HTTPException as exc:
        raise ValueError(f"{settings.api_base_url} answered {exc.status}: {exc.text}") from exc
    except aiohttp.ClientError as exc:
        raise OSError(f"cannot reach {settings.api_base_url}: {exc}") from exc
    finally:
        await http.close()
    return f"@{user['username']} (id {user['id']}), token accepted"
