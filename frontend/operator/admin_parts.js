// Small parts the console's admin views share: a date cell, a question asked before an action
// that cannot be undone, a form's submission, and the server's refusal shown where it happened.

import { h } from "../dom.js";
import { formatDateTime } from "../i18n.js";

/** A date, or a dash for none. */
export function when(iso) {
  return iso ? formatDateTime(iso) : "—";
}

/**
 * Put a question into `slot`: Cancel, or `labelKey` (a danger button unless `isSafe`) which
 * runs `onConfirm`. The buttons are `<testid>` and `<testid>-cancel`.
 */
export function askFirst(slot, question, { labelKey, testid, isSafe = false, onConfirm }) {
  const yes = h(
    "button",
    {
      type: "button",
      class: `btn btn-small ${isSafe ? "btn-primary" : "btn-danger"}`,
      dataset: { testid },
      onclick: async () => {
        yes.disabled = true;
        await onConfirm();
        slot.replaceChildren();
      },
    },
    h("span", { t: labelKey }),
  );
  const no = h(
    "button",
    {
      type: "button",
      class: "btn btn-small",
      dataset: { testid: `${testid}-cancel` },
      onclick: () => slot.replaceChildren(),
    },
    h("span", { t: "cancel" }),
  );
  slot.replaceChildren(
    h("div", { class: "adm-confirm", role: "group" }, h("p", { t: question }), no, yes),
  );
  yes.focus();
}

/** Show what the server said in `slot`; a 401 asks to sign in instead. */
export function showProblem(slot, err, console) {
  if (err.status === 401) return console.fail(err);
  delete slot.dataset.i18n; // the server's words, in its language
  slot.textContent = err.message;
  slot.hidden = false;
}

/**
 * Run `action` when `form` is submitted: its `button` disabled meanwhile, a refusal shown in
 * `problem` (cleared at each try).
 */
export function onSubmit(form, { button, problem, console }, action) {
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    problem.hidden = true;
    button.disabled = true;
    try {
      await action();
    } catch (err) {
      showProblem(problem, err, console);
    } finally {
      button.disabled = false;
    }
  });
}

/** Where a refusal appears (hidden until there is one). */
export function problemSlot(testid) {
  return h("p", { class: "adm-error", role: "alert", hidden: true, dataset: { testid } });
}
