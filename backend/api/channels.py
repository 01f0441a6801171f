"""`POST /channels/{tenant_id}/{bot_name}`: where chat platforms deliver updates to a bot in
webhook mode. No API key: each platform proves itself its own way (Telegram's secret token
header), checked by the bot; a bot that does not exist is 404, like any unknown id.
`GET` of the same address is WeCom's URL verification (a bot of another kind: 404)."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import PlainTextResponse, Response

from backend.api.deps import ChannelsDep
from backend.api.json_response import StorableJSONResponse
from backend.channels.base import NO_SUCH_BOT, WebhookAnswer, WebhookCall

router = APIRouter(tags=["channels"])


@router.post("/channels/{tenant_id}/{bot_name}")
async def deliver(
    tenant_id: str, bot_name: str, request: Request, channels: ChannelsDep
) -> Response:
    channel = channels.get(tenant_id, bot_name)
    if channel is None:
        answer = NO_SUCH_BOT
    else:
        answer = await channel.handle_webhook(await _call(request))
    return _response(answer)


@router.get("/channels/{tenant_id}/{bot_name}")
async def verify(
    tenant_id: str, bot_name: str, request: Request, channels: ChannelsDep
) -> Response:
    channel = channels.get(tenant_id, bot_name)
    answer = NO_SUCH_BOT if channel is None else await channel.verify_webhook(await _call(request))
    return _response(answer)


async def _call(request: Request) -> WebhookCall:
    return WebhookCall(
        headers={name.lower(): value for name, value in request.headers.items()},
        body=await request.body(),
        query=dict(request.query_params),
    )


def _response(answer: WebhookAnswer) -> Response:
    if answer.text is not None:
        return PlainTextResponse(answer.text, status_code=answer.status)
    return StorableJSONResponse(answer.body, status_code=answer.status)
