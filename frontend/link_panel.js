// Link your accounts (`memory.scope: user`): this browser and the person's chat-platform
// chats become one person with one memory. "Get a code" asks for a one-time code the person
// sends to a bot as `/link CODE`; a code a bot gave is typed in here. While a code is shown and
// the panel is open, the panel looks every few seconds whether it was used.

import { api } from "./api.js";
import { copyButton, formActions, h, icon, toast } from "./dom.js";
import { refusal } from "./error_box.js";
import { endUser } from "./identity.js";

const WATCH_EVERY_MS = 2000;

export class LinkPanel {
  /** `section`: the panel's slot; `onChanged()`: the memory this browser reads changed. */
  constructor(section, { onChanged }) {
    this.section = section;
    this.onChanged = onChanged;
    this.isOn = false;
    this.others = []; // the person's identities other than this browser's
    this.codeUntil = 0; // when the code shown stops being good (ms, this clock)
    this.watches = 0; // the latest watch runs; an older one stops at its next step
    this.status = h("div", { class: "link-status", dataset: { testid: "link-status" } });
    this.unlinkButton = h(
      "button",
      {
        type: "button",
        class: "btn btn-small",
        dataset: { testid: "unlink" },
        onclick: () => this.confirmUnlink(),
      },
      h("span", { t: "unlink" }),
    );
    this.codeBox = h("div", { class: "link-code-box", dataset: { testid: "link-code-box" } });
    this.input = h("input", {
      class: "link-input",
      autocomplete: "off",
      spellcheck: "false",
      maxlength: 32,
      dataset: { testid: "link-code-input" },
      tAttrs: { "aria-label": "linkEnterLabel", placeholder: "linkEnterLabel" },
    });
    this.redeemButton = h(
      "button",
      { type: "submit", class: "btn btn-small btn-primary", dataset: { testid: "link-redeem" } },
      h("span", { t: "linkButton" }),
    );
    const form = h("form", { class: "link-redeem" }, this.input, this.redeemButton);
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      this.redeem();
    });
    this.slot = h("div", { class: "memory-slot", dataset: { testid: "link-problem" } });
    section.replaceChildren(
      h("h3", { class: "panel-section-title", t: "linkTitle" }),
      h("p", { class: "muted panel-section-intro", t: "linkIntro" }),
      h("div", { class: "link-status-row" }, this.status, this.unlinkButton),
      h(
        "button",
        {
          type: "button",
          class: "btn btn-small link-get-code",
          dataset: { testid: "link-get-code" },
          onclick: () => this.getCode(),
        },
        icon("link"),
        h("span", { t: "linkGetCode" }),
      ),
      this.codeBox,
      h("p", { class: "muted panel-section-intro", t: "linkEnterHint" }),
      form,
      this.slot,
    );
    this.show(null);
  }

  /** On only where memory is kept per person (`memory_scope: user`). */
  configure(isOn) {
    this.isOn = isOn;
    this.section.hidden = !isOn;
    this.closed();
    this.codeUntil = 0;
    this.codeBox.replaceChildren();
    this.show(null);
  }

  /** The panel opened: who this browser is linked with, and a code shown is watched again. */
  async opened() {
    if (!this.isOn) return;
    const isChanged = await this.refresh();
    if (!this.codeUntil) return;
    if (isChanged && this.others.length) await this.linked(); // used while the panel was shut
    else this.watch();
  }

  closed() {
    this.watches += 1;
    clearTimeout(this.timer);
  }

  /** Read the link (404 `not_linked`: on its own); true when the other identities changed. */
  async refresh() {
    try {
      return this.show(await api.linkedPerson());
    } catch (err) {
      if (err.status === 404) return this.show(null);
      if (err.status !== 401) this.slot.replaceChildren(refusal("linkReadFailed", err));
      return false;
    }
  }

  /** Draw the person's identities other than this browser's; true when they changed. */
  show(person) {
    const others = (person?.identities ?? []).filter((key) => key !== endUser());
    const isChanged = others.join("\n") !== this.others.join("\n");
    this.others = others;
    this.unlinkButton.hidden = others.length === 0;
    if (others.length === 0) {
      this.status.replaceChildren(h("span", { t: "notLinked" }));
      return isChanged;
    }
    const pills = others.map((key) =>
      h("span", { class: "pill link-identity", dataset: { testid: "link-identity" } }, key),
    );
    this.status.replaceChildren(h("span", { t: "linkedWith" }), ...pills);
    return isChanged;
  }

  async getCode() {
    this.slot.replaceChildren();
    let issued;
    try {
      issued = await api.linkCode();
    } catch (err) {
      this.slot.replaceChildren(refusal("linkCodeFailed", err));
      return;
    }
    const { code, expires_at: expiresAt } = issued;
    const minutes = Math.max(1, Math.round((Date.parse(expiresAt) - Date.now()) / 60_000));
    this.codeUntil = Date.now() + minutes * 60_000;
    this.codeBox.replaceChildren(
      h(
        "div",
        { class: "link-code-row" },
        h("code", { class: "link-code", dataset: { testid: "link-code" } }, code),
        copyButton(() => code),
      ),
      h("p", { class: "link-code-hint", t: ["linkCodeHint", { code, n: minutes }] }),
    );
    this.watch();
  }

  /** Until the code is used or expires: look whether another account sent it. */
  watch() {
    this.closed();
    const watch = this.watches;
    const step = async () => {
      if (watch !== this.watches) return;
      if (Date.now() >= this.codeUntil) {
        this.codeUntil = 0;
        this.codeBox.replaceChildren(h("p", { class: "muted", t: "linkCodeExpired" }));
        return;
      }
      const isChanged = await this.refresh();
      if (watch !== this.watches) return;
      if (isChanged && this.others.length) return this.linked();
      this.timer = setTimeout(step, WATCH_EVERY_MS);
    };
    this.timer = setTimeout(step, WATCH_EVERY_MS);
  }

  async linked() {
    this.closed();
    this.codeUntil = 0;
    this.codeBox.replaceChildren();
    toast("linked");
    await this.onChanged();
  }

  /** Redeem the code typed in: this browser joins the person who asked for it. */
  async redeem() {
    const code = this.input.value.trim();
    if (!code) return;
    this.redeemButton.disabled = true;
    this.slot.replaceChildren();
    try {
      this.show(await api.link(code));
      this.input.value = "";
      await this.linked();
    } catch (err) {
      this.slot.replaceChildren(refusal("linkFailed", err));
    } finally {
      this.redeemButton.disabled = false;
    }
  }

  confirmUnlink() {
    const confirm = h(
      "button",
      {
        type: "button",
        class: "btn btn-small btn-danger",
        dataset: { testid: "unlink-confirm" },
        onclick: () => this.unlink(confirm),
      },
      h("span", { t: "unlink" }),
    );
    this.slot.replaceChildren(
      h(
        "div",
        { class: "memory-confirm", role: "group" },
        h("p", { t: "unlinkConfirm" }),
        formActions(() => this.slot.replaceChildren(), confirm),
      ),
    );
    confirm.focus();
  }

  /** This browser on its own again: its memory starts empty, the person keeps theirs. */
  async unlink(button) {
    button.disabled = true;
    try {
      await api.unlink();
    } catch (err) {
      if (err.status !== 404) {
        this.slot.replaceChildren(refusal("unlinkFailed", err));
        return;
      }
    }
    this.slot.replaceChildren();
    this.show(null);
    toast("unlinked");
    await this.onChanged();
  }
}
