"""The API's description for administrators, when `server.public_docs` is off.

Then `/docs` and `/redoc` are not served (a browser page cannot send the key the schema needs)
and `/openapi.json` answers an admin-scope key (the operator's or a tenant's admin key) only,
with the same 401 as any route for a missing or bad key.
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from backend.api.auth import AdminDep

router = APIRouter()


@router.get("/openapi.json", include_in_schema=False)
async def openapi_for_admins(request: Request, _admin: AdminDep) -> JSONResponse:
    return JSONResponse(request.app.openapi())
