"""`POST /channels/{tenant_id}/{bot_name}`: where chat platforms deliver updates to a bot in
webhook mode. No API key: each platform proves itself its own way (Telegram's secret token
header), checked by the bot; a bot that does not exist is 404, like any unknown id."""

from __future__ import annotations

from fastapi import APIRouter, Request

from backend.api.deps import ChannelsDep
from backend.api.json_response import StorableJSONResponse
from backend.channels.base import NO_SUCH_BOT, WebhookCall

router = APIRouter(tags=["channels"])


@router.post("/channels/{tenant_id}/{bot_name}")
async def deliver(
    tenant_id: str, bot_name: str, request: Request, channels: ChannelsDep
) -> StorableJSONResponse:
    channel = channels.get(tenant_id, bot_name)
    if channel is None:
        answer = NO_SUCH_BOT
    else:
        call = WebhookCall(
            headers={name.lower(): value for name, value in request.headers.items()},
            body=await request.body(),
        )
        answer = await channel.handle_webhook(call)
    return StorableJSONResponse(answer.body, status_code=answer.status)
