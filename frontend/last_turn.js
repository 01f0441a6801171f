// Actions on the last turn of the open conversation: regenerate the reply, and edit the user's
// message and send it again. Each sends a NEW turn through `POST /api/chat/send`, as the
// composer does: nothing stored is rewritten or deleted. They are offered on the last turn
// only, and only while no turn runs in the conversation.

import { autosize, formActions, h, icon, submitButton } from "./dom.js";
import { messageParts } from "./thread.js";

export class LastTurnActions {
  /** `onResend(text, images)`: send a new turn (images: the message's image parts). */
  constructor({ onResend }) {
    this.onResend = onResend;
    this.editing = null; // {userEl, form, bubble} while the inline editor is open
  }

  /** Offer the actions on the last turn drawn in `windowEl` (none while `isBusy`). */
  update(windowEl, { isBusy }) {
    if (isBusy) this.stopEditing();
    if (this.editing?.userEl.isConnected) return; // the reader is editing: leave it be
    this.editing = null;
    for (const el of document.querySelectorAll(".last-turn-action")) el.remove();
    for (const el of document.querySelectorAll(".is-last-turn")) {
      el.classList.remove("is-last-turn");
    }
    if (isBusy || !windowEl?.isConnected) return;
    const users = windowEl.querySelectorAll(":scope > .msg-user");
    const userEl = users[users.length - 1];
    const parts = userEl && messageParts(userEl);
    if (!parts) return;
    userEl.classList.add("is-last-turn");
    userEl.querySelector(".msg-foot").append(this.editButton(userEl, parts));
    const reply = lastReplyAfter(userEl);
    if (reply && ["complete", "incomplete"].includes(reply.dataset.status)) {
      reply.classList.add("is-last-turn");
      const foot = reply.querySelector(".msg-foot");
      const time = foot.querySelector("time");
      const button = this.regenerateButton(parts);
      if (time) time.after(button);
      else foot.append(button);
    }
  }

  regenerateButton(parts) {
    return h(
      "button",
      {
        type: "button",
        class: "copy-btn last-turn-action",
        dataset: { testid: "regenerate" },
        tAttrs: { title: "regenerateHint" },
        onclick: () => this.onResend(parts.text, parts.images),
      },
      icon("retry"),
      h("span", { t: "regenerate" }),
    );
  }

  editButton(userEl, parts) {
    return h(
      "button",
      {
        type: "button",
        class: "copy-btn last-turn-action",
        dataset: { testid: "edit-resend" },
        tAttrs: { title: "editResendHint" },
        onclick: () => this.edit(userEl, parts),
      },
      icon("pencil"),
      h("span", { t: "editResend" }),
    );
  }

  /** Put the message's text in an inline editor; sending it starts a new turn. */
  edit(userEl, parts) {
    const bubble = userEl.querySelector(".bubble");
    const area = h("textarea", {
      class: "summary-input edit-input",
      rows: 2,
      dataset: { testid: "edit-input" },
      tAttrs: { "aria-label": "editResend" },
    });
    area.value = parts.text;
    const sendButton = submitButton("send", "edit-send");
    const form = h(
      "form",
      { class: "summary-form edit-form" },
      area,
      formActions(() => this.stopEditing(), sendButton),
    );
    const canSend = () => Boolean(area.value.trim()) || parts.images.length > 0;
    area.addEventListener("input", () => {
      autosize(area);
      sendButton.disabled = !canSend();
    });
    area.addEventListener("keydown", (event) => {
      if (event.key === "Escape") {
        event.stopPropagation();
        this.stopEditing();
      } else if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
        event.preventDefault();
        form.requestSubmit();
      }
    });
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      if (!canSend()) return;
      const text = area.value;
      this.stopEditing();
      this.onResend(text, parts.images);
    });
    if (bubble) bubble.replaceWith(form);
    else userEl.querySelector(".msg-body").append(form); // a message of images only
    for (const el of userEl.querySelectorAll(".last-turn-action")) el.hidden = true;
    this.editing = { userEl, form, bubble };
    autosize(area);
    area.focus();
  }

  /** Close the editor: the stored message is shown again as it was. */
  stopEditing() {
    if (!this.editing) return;
    const { userEl, form, bubble } = this.editing;
    this.editing = null;
    if (bubble) form.replaceWith(bubble);
    else form.remove();
    for (const el of userEl.querySelectorAll(".last-turn-action")) el.hidden = false;
  }
}

/** The reply that answered `userEl`: the last assistant message before the next user one. */
function lastReplyAfter(userEl) {
  let reply = null;
  for (let el = userEl.nextElementSibling; el; el = el.nextElementSibling) {
    if (el.classList.contains("msg-user")) break;
    if (el.classList.contains("msg-assistant")) reply = el;
  }
  return reply;
}
