// Who this browser is when the server keeps memory per person (`memory.scope: user`): an end
// user key `web:<16 hex>`, made once and kept in localStorage. With one memory for the whole
// tenant there is no such key, and no request names a user.

const USER_STORAGE = "tally.user";
const USER_KEY = /^web:[0-9a-f]{16}$/;

let current = null;

/** This browser's end user key: the stored one, or a new one stored for next time. */
function browserUser() {
  const stored = localStorage.getItem(USER_STORAGE);
  if (stored && USER_KEY.test(stored)) return stored;
  const bytes = crypto.getRandomValues(new Uint8Array(8));
  const made = `web:${Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("")}`;
  localStorage.setItem(USER_STORAGE, made);
  return made;
}

/** Follow the tenant's `memory_scope` (from `GET /api/health`): "user" names this browser. */
export function useMemoryScope(scope) {
  current = scope === "user" ? browserUser() : null;
}

/** The end user key requests carry, or null when memory is the tenant's. */
export function endUser() {
  return current;
}
