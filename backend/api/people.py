"""Linked identities over HTTP: a tenant's app (or the page) asks for a one-time link code for
one of its users, redeems a code a bot gave, shows and removes the link; an administrator
lists and removes the tenant's links. Codes and links never cross tenants: another tenant's
code answers like one that does not exist."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Query, Response
from pydantic import BaseModel, Field

from backend.api.admin import own_tenant
from backend.api.auth import AdminDep, PrincipalDep, TenantDep
from backend.api.deps import ServicesDep
from backend.api.text_fields import EndUser
from backend.storage.identities import NotLinked, Person

router = APIRouter(tags=["people"])

UserQuery = Annotated[EndUser, Query(alias="user", description="the end user's key")]


class LinkCodeCreate(BaseModel):
    user: EndUser


class LinkCodePublic(BaseModel):
    code: str = Field(description="shown once; send `/link CODE` from the other account")
    expires_at: datetime


class LinkRedeem(BaseModel):
    user: EndUser
    code: str = Field(min_length=1, max_length=32)


class PersonPublic(BaseModel):
    person_id: str
    identities: list[str] = Field(description="every identity of the person, this one too")


class IdentityPublic(BaseModel):
    user: str
    person_id: str
    linked_at: datetime


class IdentityList(BaseModel):
    identities: list[IdentityPublic]


def person_public(linked: Person) -> PersonPublic:
    return PersonPublic(person_id=linked.id, identities=linked.identities)


@router.post("/api/people/link-codes", status_code=201)
async def create_link_code(
    body: LinkCodeCreate, services: ServicesDep, tenant_id: TenantDep
) -> LinkCodePublic:
    issued = await services.linking.code_for(tenant_id=tenant_id, user_key=body.user)
    return LinkCodePublic(code=issued.code, expires_at=issued.expires_at)


@router.post("/api/people/links")
async def redeem_link_code(
    body: LinkRedeem, services: ServicesDep, tenant_id: TenantDep, principal: PrincipalDep
) -> PersonPublic:
    """Codes are tried at most 10 in 10 minutes per API key (good ones count too): then 429
    `too_many_attempts`, with Retry-After."""
    key = f"key:{principal.key_id or 'local'}"  # auth.mode none: the one local caller
    linked = await services.linking.link(
        tenant_id=tenant_id, user_key=body.user, code=body.code, tried_by=[key]
    )
    return person_public(linked)


@router.get("/api/people/links")
async def read_link(user: UserQuery, services: ServicesDep, tenant_id: TenantDep) -> PersonPublic:
    linked = await services.linking.linked(tenant_id=tenant_id, user_key=user)
    if linked is None:
        raise NotLinked()
    return person_public(linked)


@router.delete("/api/people/links", status_code=204)
async def unlink(user: UserQuery, services: ServicesDep, tenant_id: TenantDep) -> Response:
    await services.linking.unlink(tenant_id=tenant_id, user_key=user)
    return Response(status_code=204)


@router.get("/api/admin/tenants/{tenant_id}/links")
async def list_links(tenant_id: str, services: ServicesDep, admin: AdminDep) -> IdentityList:
    own_tenant(admin, tenant_id)
    await services.tenants.get(tenant_id=tenant_id)
    found = await services.linking.all_links(tenant_id=tenant_id)
    return IdentityList(
        identities=[
            IdentityPublic(user=i.user_key, person_id=i.person_id, linked_at=i.linked_at)
            for i in found
        ]
    )


@router.delete("/api/admin/tenants/{tenant_id}/links", status_code=204)
async def remove_link(
    tenant_id: str, user: UserQuery, services: ServicesDep, admin: AdminDep
) -> Response:
    own_tenant(admin, tenant_id)
    await services.linking.unlink(tenant_id=tenant_id, user_key=user)
    await services.audit.record(
        tenant_id=tenant_id, actor_key_id=admin.key_id, action="link.remove", target=user
    )
    return Response(status_code=204)
