// The console's seam to the admin API: every endpoint a view calls, written once. Requests go
// through api.js (the key, errors as ApiError); url.js encodes the ids placed in a path.
// Each call answers the server's body as it is.

import { json, send } from "../api.js";
import { path, query } from "../url.js";

export const admin = {
  /** `{tenants, is_operator}`: the tenants this key may see. A chat key gets 403. */
  tenants: () => json("GET", "/api/admin/tenants"),
  createTenant: (body) => json("POST", "/api/admin/tenants", body),
  setTenantDisabled: (tenantId, disabled) =>
    json("PATCH", path`/api/admin/tenants/${tenantId}`, { disabled }),

  /** `{fields}`: each setting's effective value and its origin. */
  tenantSettings: (tenantId) => json("GET", path`/api/admin/tenants/${tenantId}/settings`),
  /** Set one field (null: back to the file's value or the default); answers `{fields}`. */
  changeTenantSetting: (tenantId, key, value) =>
    json("PATCH", path`/api/admin/tenants/${tenantId}/settings`, { values: { [key]: value } }),

  keys: (tenantId) => json("GET", path`/api/admin/tenants/${tenantId}/keys`),
  /** Answers `{key}`: the new key's secret, which the server never shows again. */
  issueKey: (tenantId, { label, scope }) =>
    json("POST", path`/api/admin/tenants/${tenantId}/keys`, { label, scope }),
  revokeKey: (keyId) => json("DELETE", path`/api/admin/keys/${keyId}`),

  /** Stop a bot and start it again; answers its state. */
  restartBot: (tenantId, bot) =>
    json("POST", path`/api/admin/tenants/${tenantId}/bots/${bot}/restart`),

  memoryHealth: () => json("GET", "/api/admin/memory-health"),
  /** `{entries}`: a tenant's memory lines, one person's (`user`) where memory is per person. */
  tenantMemory: (tenantId, user) =>
    json("GET", path`/api/admin/tenants/${tenantId}/memory` + (user ? path`?user=${user}` : "")),

  /** Start an operation of `kind` ("resummarize" | "export") on a tenant; answers it (202). */
  startOperation: (tenantId, kind) =>
    json("POST", path`/api/admin/tenants/${tenantId}/operations`, { kind }),
  /** `{operations}`: every tenant's (or `tenantId`'s), newest first. */
  operations: (tenantId) =>
    json("GET", "/api/admin/operations" + (tenantId ? path`?tenant_id=${tenantId}` : "")),
  operation: (operationId) => json("GET", path`/api/admin/operations/${operationId}`),

  /** `{entries}`: at most `limit`, newest first, before `beforeId` (null: the newest). */
  audit: ({ limit, tenantId, beforeId }) =>
    json("GET", "/api/admin/audit" + query({ limit, tenant_id: tenantId, before_id: beforeId })),

  usage: (days) => json("GET", path`/api/admin/usage?days=${days}`),
  usageCsvPath: (days) => path`/api/admin/usage.csv?days=${days}`,
  /** A file the API serves (an export, the usage CSV), fetched with the key: a Response. */
  file: (filePath) => send("GET", filePath, undefined, { extraHeaders: { Accept: "*/*" } }),
};
