// The box the page shows where something failed: an icon, a bold title over the server's words
// (its error code and message), and an action when there is one. A turn's error (reply.js) and a
// refused memory or link request (`refusal`) are this one box with different lines.

import { h, icon } from "./dom.js";

/** The server's error code, where the reader (and a bug report) finds it. */
export function errorCode(code) {
  return h("code", { class: "error-code", dataset: { testid: "error-code" } }, code);
}

/** The server's message, in its own words. */
export function errorMessage(message) {
  return h("span", { class: "turn-error-message" }, message);
}

/** An alert: `iconName`, then `titleKey` in bold over `lines`, then `action` (or nothing). */
export function errorBox(
  { className, testid, iconName = "alert" },
  titleKey,
  lines,
  action = null,
) {
  return h(
    "div",
    { class: className, role: "alert", dataset: { testid } },
    icon(iconName),
    h("div", { class: "turn-error-text" }, h("strong", { t: titleKey }), ...lines),
    action,
  );
}

/** A refusal shown in a form or on a memory entry, with the server's code and message. */
export function refusal(titleKey, err) {
  return errorBox({ className: "turn-error memory-error", testid: "memory-error" }, titleKey, [
    errorCode(err.code ?? "error"),
    errorMessage(err.message),
  ]);
}
