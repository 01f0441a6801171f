// Sign-in with an API key, shown when the server answers 401 (or 403 to the operator's key,
// which has no tenant to chat in). The key lives in sessionStorage (this tab only) and goes
// out as `Authorization: Bearer <key>`.

import { apiKey, setApiKey } from "./api.js";
import { setText } from "./dom.js";

export class SignIn {
  constructor(overlay, { onSignedIn }) {
    this.overlay = overlay;
    this.form = overlay.querySelector("form");
    this.input = overlay.querySelector("input");
    this.problem = overlay.querySelector(".auth-problem");
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
