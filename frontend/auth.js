// Sign-in with an API key, shown when the server answers 401 (or 403 to the operator's key,
// which has no tenant to chat in). The key lives in sessionStorage (this tab only) and goes
// out as `Authorization: Bearer <key>`. The chat page and the console show the same overlay,
// each with its own title and prompt.

import { apiKey, setApiKey } from "./api.js";
import { h, setText } from "./dom.js";

export class SignIn {
  /**
   * The overlay (`this.overlay`, hidden, for the caller to place) says `titleKey` and
   * `promptKey` above the key's field; `onSignedIn()` runs once a key is entered.
   */
  constructor({ titleKey, promptKey, onSignedIn }) {
    this.input = h("input", { type: "password", autocomplete: "current-password", required: true });
    this.problem = h("p", { class: "auth-problem", role: "alert", hidden: true });
    this.form = h(
      "form",
      { class: "auth-card" },
      h("div", { class: "brand-mark big", "aria-hidden": "true" }, "T"),
      h("h2", { t: titleKey }),
      h("p", { class: "muted", t: promptKey }),
      this.problem,
      h("label", {}, h("span", { t: "apiKey" }), this.input),
      h("button", { type: "submit", class: "btn btn-primary", t: "signIn" }),
    );
    this.overlay = h(
      "div",
      { class: "auth-overlay", id: "auth", dataset: { testid: "sign-in" }, hidden: true },
      this.form,
    );
    this.hasTried = false;
    this.form.addEventListener("submit", (event) => {
      event.preventDefault();
      const key = this.input.value.trim();
      if (!key) return;
      setApiKey(key);
      this.hasTried = true;
      this.overlay.hidden = true;
      onSignedIn();
    });
  }

  /**
   * Ask for a key; after a key was tried and refused, say so (`problem`: the text key that
   * says why, `keyRejected` unless given).
   */
  show(problem = "keyRejected") {
    if (!this.overlay.hidden) return;
    const wasRefused = this.hasTried && apiKey();
    setApiKey(null);
    this.problem.hidden = !wasRefused;
    if (wasRefused) setText(this.problem, problem);
    this.overlay.hidden = false;
    this.input.value = "";
    this.input.focus();
  }

  get isSignedIn() {
    return Boolean(apiKey());
  }
}
