// The demo banner: says plainly that the built-in demo provider answers, and why, from
// `GET /api/health` (`is_demo`, `demo_key_env`: the variable the config names for the missing
// key, `demo_config_file`: that config file, `demo_window`: the demo's window in messages).
// The text is built here, in the page's language; the server's English `notice` is not shown.
// Dismissed, it stays away for this browser session.

import { h } from "./dom.js";
import { t } from "./i18n.js";

const DISMISSED_KEY = "tally.demoBannerDismissed";
const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]{0,127}$/;
const MAX_FILE_CHARS = 300; // a path, shown as text

/** The banner's sentences as text specs (key, or [key, vars]) for `setText`. */
export function demoNoticeSpecs(health) {
  const env = typeof health?.demo_key_env === "string" ? health.demo_key_env.trim() : "";
  // Older servers send no `demo_key_env`; then the page says no key is configured.
  const specs = [ENV_NAME.test(env) ? ["demoNoKeyEnv", { env }] : "demoNoKey"];
  const file = typeof health?.demo_config_file === "string" ? health.demo_config_file.trim() : "";
  if (file && file.length <= MAX_FILE_CHARS) specs.push(["demoConfigFile", { file }]);
  const window = health?.demo_window;
  if (Number.isInteger(window) && window > 0) specs.push(["demoWindow", { n: window }]);
  return specs;
}

/** The banner's text in the current language. */
export function demoNoticeText(health) {
  return demoNoticeSpecs(health)
    .map((spec) => (Array.isArray(spec) ? t(...spec) : t(spec)))
    .join(" ");
}

export class DemoBanner {
  /** `el`: the banner, holding a `.demo-notice` and a `.demo-dismiss` button. */
  constructor(el) {
    this.el = el;
    this.notice = el.querySelector(".demo-notice");
    el.querySelector(".demo-dismiss").addEventListener("click", () => this.dismiss());
  }

  get isDismissed() {
    return sessionStorage.getItem(DISMISSED_KEY) === "1";
  }

  show(health) {
    this.el.hidden = !health?.is_demo || this.isDismissed;
    if (this.el.hidden) return;
    // One span a sentence, each kept in the page's language when it changes.
    const sentences = demoNoticeSpecs(health).map((spec) => h("span", { t: spec }));
    this.notice.replaceChildren(...sentences.flatMap((span, i) => (i ? [" ", span] : [span])));
  }

  dismiss() {
    sessionStorage.setItem(DISMISSED_KEY, "1");
    this.el.hidden = true;
  }
}
