"""Confirm before remember over HTTP: the lines proposed to an end user (`memory.confirm_writes`)
and their answer. Approved, a line is written into the person's memory and reaches the model
from the next turn; discarded or expired, it never does."""

from __future__ import annotations

from datetime import date, datetime
from typing import Annotated, Literal

from fastapi import APIRouter, Query
from pydantic import BaseModel, Field

from backend.api.auth import TenantDep
from backend.api.deps import ServicesDep
from backend.api.schemas import Decision
from backend.api.text_fields import EndUser
from backend.memory.entries import origin_of_kind, split_supersedes, writer_of
from backend.storage.pending_memory import Proposal

router = APIRouter(prefix="/api/memory/proposals", tags=["memory"])


class ProposalPublic(BaseModel):
    id: str
    user: str = Field(description="the identity it was said by")
    session_id: str
    source: str = Field(description="what proposed it: auto-overflow, or where the model did")
    origin: str | None = Field(None, description="a summary's line: where its turns were said")
    content: str
    date: date
    status: Literal["pending", "approved", "discarded", "expired"]
    expires_at: datetime


class ProposalList(BaseModel):
    proposals: list[ProposalPublic]


class ProposalDecision(Decision):
    approved: bool
    user: EndUser | None = Field(
        None, description="the person answering: then only a proposal to them (else 404)"
    )


def proposal_public(proposal: Proposal) -> ProposalPublic:
    kind = split_supersedes(proposal.source)[0]
    return ProposalPublic(
        id=proposal.id,
        user=proposal.user_key,
        session_id=proposal.session_id,
        source=writer_of(kind),
        origin=origin_of_kind(kind),
        content=proposal.content,
        date=proposal.date,
        status=proposal.status,
        expires_at=proposal.expires_at,
    )


@router.get("")
async def list_proposals(
    user: Annotated[EndUser, Query(description="the end user (any identity of the person)")],
    services: ServicesDep,
    tenant_id: TenantDep,
) -> ProposalList:
    """What waits for the person's answer, oldest first; expired ones are gone."""
    found = await services.proposals.pending(tenant_id=tenant_id, user_key=user)
    return ProposalList(proposals=[proposal_public(p) for p in found])


@router.post("/{proposal_id}/decision")
async def decide_proposal(
    proposal_id: str, body: ProposalDecision, services: ServicesDep, tenant_id: TenantDep
) -> ProposalPublic:
    """Approve (the line is written now) or discard; 409 once answered, 410 once expired.

    Who may decide is the tenant's app's call: any of the tenant's keys decides any of its
    proposals. An app that speaks for its users passes the one answering as `user`; then only
    a proposal to that person is decided (another's is 404, as one that does not exist).
    Only JSON `true` approves."""
    decided = await services.proposals.decide(
        tenant_id=tenant_id, proposal_id=proposal_id, approve=body.approved, user_key=body.user
    )
    return proposal_public(decided)
