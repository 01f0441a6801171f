// The one seam to the server: JSON requests, the streamed turn, the API key.
// Errors arrive as `{"error": {"code", "message"}}` and become ApiError. With memory kept per
// person, a new session and every memory request name this browser's end user (identity.js).

import { endUser } from "./identity.js";
import { readEvents } from "./sse.js";
import { path, query } from "./url.js";

const KEY_STORAGE = "tally.apiKey";

export class ApiError extends Error {
  constructor(status, code, message, retryAfter = null) {
    super(message);
    this.status = status;
    this.code = code;
    this.retryAfter = retryAfter;
  }
}

export function apiKey() {
  return sessionStorage.getItem(KEY_STORAGE);
}

export function setApiKey(key) {
  if (key) sessionStorage.setItem(KEY_STORAGE, key);
  else sessionStorage.removeItem(KEY_STORAGE);
}

/** A random id for Idempotency-Key (crypto.randomUUID needs a secure context). */
export function newRequestId() {
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}

let unauthorizedHandler = () => {};

/**
 * Called when the server answers 401 to the key in use: the page asks for an API key. A 401
 * to a key replaced since (a request of a refused key still in flight) says nothing of the
 * new one, and must not send it away.
 */
export function onUnauthorized(handler) {
  unauthorizedHandler = handler;
}

function headers(extra = {}) {
  const result = { Accept: "application/json", ...extra };
  const key = apiKey();
  if (key) result.Authorization = `Bearer ${key}`;
  return result;
}

async function toError(response, sentKey) {
  let code = `http_${response.status}`;
  let message = response.statusText || "request failed";
  try {
    const body = await response.json();
    if (body?.error) ({ code, message } = body.error);
  } catch {
    // not JSON: keep the status line
  }
  const retryAfter = Number(response.headers.get("Retry-After")) || null;
  if (response.status === 401 && sentKey === apiKey()) unauthorizedHandler();
  return new ApiError(response.status, code, message, retryAfter);
}

export async function send(method, path, body, { signal, extraHeaders } = {}) {
  const sentKey = apiKey();
  const init = { method, headers: headers(extraHeaders), signal };
  if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  let response;
  try {
    response = await fetch(path, init);
  } catch (err) {
    if (err.name === "AbortError") throw err;
    throw new ApiError(0, "network_error", "the server could not be reached");
  }
  if (!response.ok) throw await toError(response, sentKey);
  return response;
}

export async function json(method, path, body) {
  const response = await send(method, path, body);
  return response.status === 204 ? null : response.json();
}

/** The end user as a query (`?user=`), or nothing when memory is the tenant's. */
const asUser = (params = {}) => query({ ...params, user: endUser() });
/** A body naming the end user, when there is one. */
const withUser = (body) => (endUser() ? { ...body, user: endUser() } : body);

export const api = {
  /** Health answers 503 with its usual body when the database is down. */
  async health() {
    const sentKey = apiKey();
    const response = await fetch("/api/health", { headers: headers() }).catch(() => null);
    if (!response) throw new ApiError(0, "network_error", "the server could not be reached");
    if (response.ok || response.status === 503) return response.json();
    throw await toError(response, sentKey);
  },

  listSessions: ({ limit = 50, offset = 0, q } = {}) =>
    json("GET", `/api/chat/sessions${query({ limit, offset, q })}`),
  createSession: (body) => json("POST", "/api/chat/sessions", withUser(body)),
  getSession: (id) => json("GET", path`/api/chat/sessions/${id}`),
  renameSession: (id, title) => json("PATCH", path`/api/chat/sessions/${id}`, { title }),
  deleteSession: (id) => json("DELETE", path`/api/chat/sessions/${id}`),
  setSummary: (id, summary) => json("PUT", path`/api/chat/sessions/${id}/summary`, { summary }),
  messages: (id, { includeArchived, limit, beforeId } = {}) =>
    json(
      "GET",
      path`/api/chat/sessions/${id}/messages` +
        query({
          include_archived: includeArchived ? "true" : undefined,
          limit,
          before_id: beforeId,
        }),
    ),
  toolConversations: (id) => json("GET", path`/api/chat/sessions/${id}/tool-conversations`),
  cancel: (id) => json("POST", path`/api/chat/sessions/${id}/cancel`),
  /**
   * Approve or deny a tool call that a turn's `tool.approval` event asked about; answers
   * `{tool_call_id, approved}`. A 404 (`approval_not_found`) means the call no longer waits.
   */
  decideToolCall: (turnId, toolCallId, approved) =>
    json("POST", path`/api/chat/turns/${turnId}/approvals`, {
      tool_call_id: toolCallId,
      approved,
    }),

  memory: () => json("GET", `/api/memory${asUser()}`),
  saveMemory: (content) => json("PUT", `/api/memory${asUser()}`, { content }),
  memoryEntries: (q) => json("GET", `/api/memory/entries${asUser({ q })}`),
  /** Remember one fact by hand; answers the stored entry (source `manual`, dated today). */
  addMemoryEntry: (content) => json("POST", `/api/memory/entries${asUser()}`, { content }),
  deleteMemoryEntry: (id) => json("DELETE", path`/api/memory/entries/${id}` + asUser()),
  /** Undo the summary that wrote an entry; answers `{session_id, returned_to_window}`. */
  revertMemoryEntry: (id) => json("POST", path`/api/memory/entries/${id}/revert` + asUser()),
  /** Lines about this person waiting for their OK (`memory.confirm_writes`), oldest first. */
  memoryProposals: () => json("GET", `/api/memory/proposals${asUser()}`),
  /** Remember (written at once) or discard a proposed line; answers the decided proposal. */
  decideProposal: (id, approved) =>
    json("POST", path`/api/memory/proposals/${id}/decision`, withUser({ approved })),

  /** A one-time code (`{code, expires_at}`) another account sends back as `/link CODE`. */
  linkCode: () => json("POST", "/api/people/link-codes", { user: endUser() }),
  /** Redeem a code a bot gave; answers the person `{person_id, identities}`. */
  link: (code) => json("POST", "/api/people/links", { user: endUser(), code }),
  /** The person this browser is linked as; 404 `not_linked` when it is on its own. */
  linkedPerson: () => json("GET", `/api/people/links${asUser()}`),
  unlink: () => json("DELETE", `/api/people/links${asUser()}`),

  /**
   * Start a turn and yield its events. A refusal before the stream starts throws ApiError;
   * `idempotencyKey` makes a retry resume the same turn instead of adding a second message.
   * A connection that drops mid-turn is picked up again where it stopped (Last-Event-ID): the
   * server keeps the turn's events, so no word is lost or shown twice.
   */
  async *streamTurn({ sessionId, message, idempotencyKey, signal }) {
    // Only a send that creates the session names the user: a session keeps the one it has.
    const body = sessionId
      ? { session_id: sessionId, message, stream: true }
      : withUser({ message, stream: true });
    const response = await send("POST", "/api/chat/send", body, {
      signal,
      extraHeaders: { "Idempotency-Key": idempotencyKey, Accept: "text/event-stream" },
    });
    let turnId = null;
    let lastId = null;
    let events = readEvents(response);
    for (let attempt = 1; ; attempt += 1) {
      try {
        for await (const item of events) {
          if (item.event === "turn.started") turnId = item.data.turn_id;
          if (item.id !== null) lastId = item.id;
          yield item;
          if (item.event === "turn.completed" || item.event === "error") return;
        }
      } catch (err) {
        if (err.name === "AbortError" || turnId === null || attempt > RESUME_ATTEMPTS) throw err;
      }
      if (turnId === null || attempt > RESUME_ATTEMPTS) return; // the caller says: interrupted
      await pause(RESUME_PAUSE_MS * attempt, signal);
      events = await resumedEvents(turnId, lastId, signal);
      if (events === null) return; // the server no longer has the turn's events
    }
  },
};

const RESUME_ATTEMPTS = 5;
const RESUME_PAUSE_MS = 500;

/** The turn's events after `lastId`; null when the server no longer has them, none for now
 * when it cannot be reached. */
async function resumedEvents(turnId, lastId, signal) {
  const extraHeaders = { Accept: "text/event-stream" };
  if (lastId !== null) extraHeaders["Last-Event-ID"] = lastId;
  try {
    const eventsPath = path`/api/chat/turns/${turnId}/events`;
    return readEvents(await send("GET", eventsPath, undefined, { signal, extraHeaders }));
  } catch (err) {
    if (err.name === "AbortError") throw err;
    if (err instanceof ApiError && err.status === 404) return null;
    return (async function* () {})(); // the next attempt tries again
  }
}

function pause(ms, signal) {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(resolve, ms);
    const abort = () => {
      clearTimeout(timer);
      reject(new DOMException("aborted", "AbortError"));
    };
    signal?.addEventListener("abort", abort, { once: true });
  });
}
