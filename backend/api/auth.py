"""Who is calling: the tenant of a chat request, or an administrator.

With `auth.mode: none` (loopback only) every caller is the `default` tenant and the operator.
With `auth.mode: keys` a request needs `Authorization: Bearer <key>`; every failure is the same
401, and nothing is trusted for coming from localhost.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Header

from backend.api.deps import ServicesDep
from backend.domain.tenants import DEFAULT_TENANT
from backend.errors import TallyError, Unauthorized
from backend.tenancy.keys import ADMIN_TENANT, Principal

LOCAL_OPERATOR = Principal(DEFAULT_TENANT, "admin")


class Forbidden(TallyError):
    code = "forbidden"
    status = 403


Authorization = Annotated[str | None, Header(include_in_schema=False)]


async def current_principal(
    services: ServicesDep, authorization: Authorization = None
) -> Principal:
    if services.settings.auth.mode == "none":
        return LOCAL_OPERATOR
    return await services.authenticator.authenticate(authorization)


PrincipalDep = Annotated[Principal, Depends(current_principal)]


async def optional_principal(
    services: ServicesDep, authorization: Authorization = None
) -> Principal | None:
    """The caller, for a public route that shows more to an administrator; None for anyone
    without a valid key (no 401: the route answers them too)."""
    if services.settings.auth.mode == "none":
        return Principal(ADMIN_TENANT, "admin")  # loopback only: the operator's machine
    if authorization is None:
        return None
    try:
        return await services.authenticator.authenticate(authorization)
    except Unauthorized:
        return None


OptionalPrincipalDep = Annotated[Principal | None, Depends(optional_principal)]


async def chat_tenant(principal: PrincipalDep) -> str:
    """The caller's tenant, for a route that starts a turn: the chat service counts it
    against the tenant's requests-per-minute limit, as it does every channel's messages."""
    return _tenant_of(principal)


async def current_tenant(services: ServicesDep, principal: PrincipalDep) -> str:
    """The caller's tenant, once its request fits the tenant's requests-per-minute limit."""
    tenant_id = _tenant_of(principal)
    runtime = await services.runtimes.get(tenant_id)
    await services.chat.admit(tenant_id, per_minute=runtime.settings.quotas.requests_per_minute)
    return tenant_id


def _tenant_of(principal: Principal) -> str:
    if principal.is_operator:
        raise Forbidden("the operator key has no tenant: chat with a tenant's key")
    return principal.tenant_id


async def current_admin(services: ServicesDep, principal: PrincipalDep) -> Principal:
    """The operator, or a tenant's admin-scope key (which manages only its own tenant)."""
    if services.settings.auth.mode == "none":
        return Principal("*", "admin")
    if principal.scope != "admin":
        raise Forbidden("this needs an admin key")
    return principal


TenantDep = Annotated[str, Depends(current_tenant)]
ChatTenantDep = Annotated[str, Depends(chat_tenant)]
AdminDep = Annotated[Principal, Depends(current_admin)]
