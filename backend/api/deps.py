"""FastAPI dependencies as named types: the services of the app, its chat-channel bots, and
its relayed turn streams.

Every dependency is `async def`, even one that only looks something up: FastAPI runs a plain
`def` dependency in a worker thread, two thread switches on every request for nothing.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from backend.api.turn_relay import TurnRelays
from backend.channels.bot_runner import BotRunner
from backend.composition.services import Services
from backend.operations.runner import AdminOperations


async def get_services(request: Request) -> Services:
    services: Services = request.app.state.services
    return services


ServicesDep = Annotated[Services, Depends(get_services)]


async def get_channels(request: Request) -> BotRunner:
    channels: BotRunner = request.app.state.channels
    return channels


ChannelsDep = Annotated[BotRunner, Depends(get_channels)]


async def get_relays(request: Request) -> TurnRelays:
    relays: TurnRelays = request.app.state.relays
    return relays


RelaysDep = Annotated[TurnRelays, Depends(get_relays)]


async def get_operations(request: Request) -> AdminOperations:
    operations: AdminOperations = request.app.state.operations
    return operations


OperationsDep = Annotated[AdminOperations, Depends(get_operations)]
