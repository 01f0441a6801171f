"""The channel layer's seam: a bot on a chat platform, run for one tenant.

A channel starts (connects, registers its webhook or starts polling), hands every message it
receives to the chat service as an `InboundMessage`, sends the reply back, and stops. Bots are
rows of config (`channels:`), built by kind from `PLATFORMS` in `channels/registry.py`, each a
`PlatformBot` (`channels/bot.py`).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Protocol

from backend.metrics.registry import CHANNEL_EVENTS

log = logging.getLogger(__name__)


@dataclass
class ChannelStatus:
    """What an operator sees of a bot (`GET /api/health`)."""

    tenant_id: str
    bot: str
    kind: str
    mode: str
    is_connected: bool = False
    is_leader: bool = False  # this process runs its receiving side (one process of all)
    last_update_at: datetime | None = None
    last_error: str | None = None
    last_error_at: datetime | None = None
    counts: dict[str, int] = field(default_factory=dict)  # updates, replies, errors


@dataclass(frozen=True, slots=True)
class WebhookCall:
    """A platform's HTTP call to `POST /channels/{tenant_id}/{bot_name}`."""

    headers: Mapping[str, str]  # names lower-cased
    body: bytes
    query: Mapping[str, str] = field(default_factory=dict)  # WeCom signs in the query string


@dataclass(frozen=True, slots=True)
class WebhookAnswer:
    status: int
    body: dict[str, object]
    text: str | None = None  # set: answered as this plain text (WeCom's URL verification)


def error_body(code: str, message: str) -> dict[str, object]:
    return {"error": {"code": code, "message": message}}


def refused(reason: str) -> WebhookAnswer:
    """What a platform is told about an update the bot refused: received (a 200, so it stops
    delivering it again), and why, for whoever reads the platform's delivery log."""
    return WebhookAnswer(200, {"refused": reason})


# What the webhook route answers for a bot that does not exist or takes no webhooks: the same,
# so an outsider learns nothing about which tenants and bots there are.
NO_SUCH_BOT = WebhookAnswer(404, error_body("not_found", "there is no such bot"))


class Channel(Protocol):
    tenant_id: str
    name: str
    status: ChannelStatus

    async def start(self) -> None:
        """Connect and begin receiving; a platform that is down is retried, not fatal."""

    async def stop(self) -> None:
        """Stop receiving, let messages in hand finish (briefly), close the connection."""

    async def handle_webhook(self, call: WebhookCall) -> WebhookAnswer:
        """Check and keep one delivered update; it is answered in the background."""

    async def verify_webhook(self, call: WebhookCall) -> WebhookAnswer:
        """A platform's `GET` of the webhook's address (WeCom's URL verification)."""


def note_refused(status: ChannelStatus, platform_id: str, reason: str) -> None:
    """An update the bot could not read, shown in its status, counted and logged once."""
    status.last_error = f"refused update {platform_id}: {reason}"
    status.last_error_at = datetime.now(UTC)
    CHANNEL_EVENTS.labels(status.tenant_id, status.bot, "refused").inc()
    log.warning(
        "%s %s: refused update %s: %s",
        status.kind,
        status.bot,
        platform_id,
        reason,
        extra={"tenant": status.tenant_id},
    )


def note_failure(
    status: ChannelStatus, what: str, error: BaseException, *, connection_lost: bool
) -> None:
    """A platform call that failed (`what`: connect, poll, reply...), shown in the bot's status,
    counted and logged; `connection_lost` when the bot no longer hears the platform."""
    if connection_lost:
        status.is_connected = False
    status.last_error = f"{what}: {type(error).__name__}: {error}"
    status.last_error_at = datetime.now(UTC)
    CHANNEL_EVENTS.labels(status.tenant_id, status.bot, "error").inc()
    log.warning(
        "%s %s: %s failed: %s",
        status.kind,
        status.bot,
        what,
        error,
        extra={"tenant": status.tenant_id},
    )
