// Confirm before remember (`memory.confirm_writes`): the lines Tally would remember about this
// person, in the memory panel, each with Remember and Discard, and their number on the memory
// button. Nothing proposed reaches memory until the person says so; a remembered line is
// written at once.

import { api } from "./api.js";
import { h, icon, setAttrs, toast } from "./dom.js";
import { refusal } from "./error_box.js";

/** Answers that say the line no longer waits: not found, answered elsewhere, or expired. */
const NO_LONGER_WAITING = new Set([404, 409, 410]);

export class PendingMemory {
  /**
   * `section`: the panel's slot for the list; `badge`: the count on the memory button;
   * `onDecided()`: a line was remembered or discarded, so the memory is drawn again.
   */
  constructor(section, badge, { onDecided }) {
    this.section = section;
    this.badge = badge;
    this.onDecided = onDecided;
    this.isOn = false;
    this.loads = 0; // the latest load wins: an older answer arriving late is dropped
    this.list = h("div", { class: "memory-list", dataset: { testid: "pending-list" } });
    section.replaceChildren(
      h("h3", { class: "panel-section-title", t: "pendingTitle" }),
      h("p", { class: "muted panel-section-intro", t: "pendingIntro" }),
      this.list,
    );
  }

  /** On only where lines about a person wait for their OK (`confirm_writes`, user scope). */
  configure(isOn) {
    this.isOn = isOn;
    this.loads += 1;
    this.draw([]);
    if (isOn) this.refresh();
  }

  /** Load what waits now (after a turn, when the panel opens, after a decision). */
  async refresh() {
    if (!this.isOn) return;
    const load = ++this.loads;
    try {
      const { proposals } = await api.memoryProposals();
      if (load === this.loads) this.draw(proposals);
    } catch (err) {
      if (err.status !== 401) toast({ raw: `${err.code}: ${err.message}` }, { isError: true });
    }
  }

  /** The list, oldest first; the section and the badge only while something waits. */
  draw(proposals) {
    this.section.hidden = proposals.length === 0;
    this.badge.hidden = proposals.length === 0;
    this.badge.textContent = String(proposals.length);
    setAttrs(this.badge, { title: "pendingCount" }, { n: proposals.length });
    this.list.replaceChildren(...proposals.map((proposal) => this.item(proposal)));
  }

  /** One proposed line: its date, its source, its text, and the two answers. */
  item(proposal) {
    const slot = h("div", { class: "memory-slot" }); // a refusal, when the answer failed
    const buttons = [true, false].map((isApproved) =>
      h(
        "button",
        {
          type: "button",
          class: isApproved ? "btn btn-small btn-primary" : "btn btn-small",
          dataset: { testid: isApproved ? "pending-remember" : "pending-discard" },
          onclick: () => this.decide(proposal, isApproved, buttons, slot),
        },
        icon(isApproved ? "check" : "x"),
        h("span", { t: isApproved ? "remember" : "discard" }),
      ),
    );
    return h(
      "div",
      { class: "memory-entry is-pending", dataset: { testid: "pending-entry", id: proposal.id } },
      h(
        "div",
        { class: "memory-meta" },
        h("time", { datetime: proposal.date }, proposal.date),
        h(
          "span",
          { class: "pill memory-source", dataset: { testid: "pending-source" } },
          proposal.source,
        ),
        Boolean(proposal.origin) &&
          h(
            "span",
            { class: "pill memory-origin", dataset: { testid: "pending-origin" } },
            proposal.origin,
          ),
      ),
      h("p", { class: "memory-content", dataset: { testid: "pending-content" } }, proposal.content),
      h(
        "div",
        { class: "pending-actions", role: "group", tAttrs: { "aria-label": "pendingActions" } },
        buttons,
      ),
      slot,
    );
  }

  async decide(proposal, isApproved, buttons, slot) {
    for (const button of buttons) button.disabled = true;
    slot.replaceChildren();
    try {
      await api.decideProposal(proposal.id, isApproved);
      toast(isApproved ? "pendingRemembered" : "pendingDiscarded");
    } catch (err) {
      if (!NO_LONGER_WAITING.has(err.status)) {
        for (const button of buttons) button.disabled = false;
        slot.replaceChildren(refusal("pendingFailed", err));
        return;
      }
      toast({ raw: err.message }, { isError: true }); // it leaves the list, saying why
    }
    await Promise.all([this.refresh(), this.onDecided()]);
  }
}
