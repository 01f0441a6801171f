// A tool call on the page as a card: its name, arguments, result and duration, and, while the
// call waits for a person, Approve and Deny with the time left before it is denied.

import { h, icon, setText } from "./dom.js";

/** A tool call as a card: name, arguments, result and duration. */
export class ToolCard {
  constructor({ tool_call_id, tool_name, arguments: args }) {
    this.status = h("span", { class: "tool-status", t: "toolRunning" });
    this.resultBox = h("pre", { class: "tool-result" });
    this.resultRow = h(
      "div",
      { class: "tool-row", hidden: true },
      h("span", { class: "tool-label", t: "toolResult" }),
      this.resultBox,
    );
    this.el = h(
      "div",
      {
        class: "tool-card",
        dataset: { testid: "tool-card", state: "running", callId: tool_call_id },
      },
      h(
        "div",
        { class: "tool-head" },
        icon("tool", "icon tool-icon"),
        h("span", { class: "tool-name" }, tool_name),
        this.status,
      ),
      h(
        "div",
        { class: "tool-row" },
        h("span", { class: "tool-label", t: "toolArguments" }),
        h("code", { class: "tool-args" }, formatArguments(args)),
      ),
      this.resultRow,
    );
  }

  /**
   * The call waits for a person's decision: Approve, Deny, and when it is denied on its own.
   * `sendDecision(approved)` posts it (rejects with ApiError). Asked again (a resumed stream
   * replays events) or once the result is in, it changes nothing.
   */
  askApproval({ timeout_s: timeoutS }, sendDecision) {
    if (this.el.dataset.state !== "running" || this.approval) return;
    this.el.dataset.state = "approval";
    setText(this.status, "toolAwaitingApproval");
    this.buttons = [true, false].map((isApproved) =>
      h(
        "button",
        {
          type: "button",
          class: isApproved ? "btn btn-small btn-primary" : "btn btn-small",
          dataset: { testid: isApproved ? "tool-approve" : "tool-deny" },
          onclick: () => this.decide(isApproved, sendDecision),
        },
        icon(isApproved ? "check" : "x"),
        h("span", { t: isApproved ? "approve" : "deny" }),
      ),
    );
    const deadlineAt = Date.now() + timeoutS * 1000;
    const deadline = h("span", { t: deadlineSpec(deadlineAt) });
    this.deadlineTimer = setInterval(() => setText(deadline, deadlineSpec(deadlineAt)), 1000);
    this.approvalError = h("span", { class: "tool-approval-error", role: "alert" });
    this.approvalBody = h(
      "div",
      { class: "tool-approval-body" },
      h("span", {}, h("span", { t: "approvalWaiting" }), " · ", deadline),
      h(
        "div",
        {
          class: "tool-approval-actions",
          role: "group",
          tAttrs: { "aria-label": "approvalActions" },
        },
        this.buttons,
      ),
      this.approvalError,
    );
    this.approval = h(
      "div",
      { class: "tool-row tool-approval", dataset: { testid: "tool-approval" } },
      h("span", { class: "tool-label", t: "toolApproval" }),
      this.approvalBody,
    );
    this.resultRow.before(this.approval);
  }

  async decide(isApproved, sendDecision) {
    for (const button of this.buttons) button.disabled = true;
    this.approvalError.replaceChildren();
    try {
      await sendDecision(isApproved);
    } catch (err) {
      if (!this.approval) return; // the result came in meanwhile and says what happened
      if (err.status === 404) return this.closeApproval("approvalGone", "info");
      for (const button of this.buttons) button.disabled = false;
      this.buttons[isApproved ? 0 : 1].focus(); // disabling it had dropped the keyboard's focus
      setText(this.approvalError, ["approvalFailed", { message: err.message }]);
      return;
    }
    if (!this.approval) return;
    this.el.dataset.decision = isApproved ? "approved" : "denied";
    if (isApproved) this.closeApproval("approvedByYou", "check");
    else this.closeApproval("deniedByYou", "x", "toolDenied");
  }

  /** The call no longer waits: its buttons give way to a note until the result comes. */
  closeApproval(noteKey, iconName, statusKey = "toolRunning") {
    clearInterval(this.deadlineTimer);
    this.el.dataset.state = "running";
    setText(this.status, statusKey);
    this.approvalBody.replaceChildren(
      h(
        "span",
        { class: "tool-approval-note", role: "status", dataset: { testid: "tool-decision" } },
        icon(iconName),
        h("span", { t: noteKey }),
      ),
    );
  }

  /** Drop the approval row: the result came, or the turn ended without one. */
  removeApproval() {
    if (!this.approval) return;
    if (this.el.dataset.state === "approval") this.closeApproval("approvalGone", "info");
    this.approval.remove();
    this.approval = null;
  }

  finish({ result, is_error, duration_ms }) {
    this.removeApproval();
    this.el.dataset.state = is_error ? "error" : "ok";
    this.resultBox.textContent = result;
    this.resultRow.hidden = false;
    if (is_error) {
      setText(this.status, "toolFailed");
      this.status.append(` · ${duration_ms} ms`);
    } else {
      delete this.status.dataset.i18n;
      this.status.textContent = `${duration_ms} ms`;
    }
  }
}

/** "denied automatically in …" until `deadlineAt` (ms), as an i18n spec. */
function deadlineSpec(deadlineAt) {
  const seconds = Math.max(0, Math.ceil((deadlineAt - Date.now()) / 1000));
  if (seconds < 60) return ["approvalDeadlineSeconds", { n: seconds }];
  if (seconds < 3600) return ["approvalDeadlineMinutes", { n: Math.ceil(seconds / 60) }];
  return ["approvalDeadlineHours", { n: Math.ceil(seconds / 3600) }];
}

function formatArguments(args) {
  if (!args || Object.keys(args).length === 0) return "{}";
  return JSON.stringify(args);
}
