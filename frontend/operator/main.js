// The operator's console: one view at a time, chosen by the hash (#/tenants, #/keys, …), each
// a module exporting `render(root, console)`. It speaks only the admin and usage APIs; a chat
// key gets 403 from them and is asked for an admin key instead.

import { apiKey, onUnauthorized, setApiKey } from "../api.js";
import { SignIn } from "../auth.js";
import { addStrings, applyI18n } from "../i18n.js";
import { toast } from "../dom.js";
import { CONSOLE_STRINGS } from "./i18n_console.js";

const VIEWS = {
  tenants: () => import("./tenants.js"),
  keys: () => import("./keys.js"),
  bots: () => import("./bots.js"),
  usage: () => import("./usage.js"),
  memory: () => import("./memory_health.js"),
  audit: () => import("./audit.js"),
};
const DEFAULT_VIEW = "tenants";

addStrings(CONSOLE_STRINGS); // before anything is drawn

const root = document.getElementById("op-view");
const signIn = new SignIn({
  titleKey: "opSignInTitle",
  promptKey: "opSignInPrompt",
  onSignedIn: () => show(),
});
document.getElementById("toasts").before(signIn.overlay);
onUnauthorized(() => signIn.show());

/** What a view may use besides its root: report an ApiError, go to another view. */
const console_ = {
  isAdmin: false, // a view has loaded with this key: it is an admin key, whatever it is refused
  /**
   * 401: sign in; 403 `forbidden` before any view loaded (a chat key): ask for an admin key;
   * any other refusal (`operator_only` to a tenant's admin key, `tenant_disabled`) is said in a
   * toast and signs nobody out.
   */
  fail(err) {
    if (err.status === 401) return signIn.show();
    if (err.status === 403 && err.code === "forbidden" && !this.isAdmin) {
      return signIn.show("opNeedsAdmin");
    }
    toast({ raw: `${err.code}: ${err.message}` }, { isError: true });
  },
  go(view, params = {}) {
    const query = new URLSearchParams(params).toString();
    location.hash = `#/${view}${query ? `?${query}` : ""}`;
  },
};

/** The view named by the hash and its parameters (`#/usage?tenant=acme`). */
function route() {
  const [path, query = ""] = location.hash.replace(/^#\/?/, "").split("?");
  const name = path in VIEWS ? path : DEFAULT_VIEW;
  return { name, params: Object.fromEntries(new URLSearchParams(query)) };
}

let shown = 0; // a slower earlier view must not paint over a later one

async function show() {
  const { name, params } = route();
  const token = ++shown;
  for (const link of document.querySelectorAll("#op-nav a")) {
    link.classList.toggle("is-active", link.dataset.view === name);
    if (link.dataset.view === name) link.setAttribute("aria-current", "page");
    else link.removeAttribute("aria-current");
  }
  document.getElementById("sign-out").hidden = !apiKey();
  const view = await VIEWS[name]();
  if (token !== shown) return;
  const section = document.createElement("section");
  section.className = `op-view op-${name}`;
  section.dataset.testid = `view-${name}`;
  root.replaceChildren(section);
  try {
    await view.render(section, console_, params);
    console_.isAdmin = true;
  } catch (err) {
    console_.fail(err);
  }
  applyI18n(section);
}

document.getElementById("sign-out").addEventListener("click", () => {
  setApiKey(null);
  location.reload();
});
window.addEventListener("hashchange", show);
applyI18n();
show();

export const opConsole = console_; // what the browser tests drive
