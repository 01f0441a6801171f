// Long operations on a tenant (re-summarize its raw memory lines, export its memory): started
// with one POST, then followed by polling until done or failed, shown as a <progress> bar. Files
// the API serves (an export, the usage CSV) need the Authorization header, which a plain link
// cannot send: they are fetched with the key and saved through a Blob URL.

import { h, setText } from "../dom.js";
import { admin } from "./admin_api.js";

const POLL_EVERY_MS = 500;
const REVOKE_AFTER_MS = 60_000; // the browser has taken its copy long before
// "stalled" is still running, but its process stopped reporting: it may yet go on.
const ENDED = new Set(["done", "failed"]);
const KIND_LABELS = { resummarize: "operationResummarize", export: "operationExport" };

/**
 * Show `operation` at the end of `host` and follow it until it is done or failed (or its view
 * leaves the page). `fail(err)` reports a request that failed; `onFinished(operation)` runs
 * once it ends, or with null once it can no longer be read. An export, once done, offers its
 * file.
 */
export function followOperation(host, operation, { fail, onFinished = () => {} }) {
  const label = KIND_LABELS[operation.kind];
  const title = label
    ? h("span", { class: "op-operation-title", t: label })
    : h("span", { class: "op-operation-title" }, operation.kind);
  const bar = h("progress", {
    dataset: { testid: "operation-progress" },
    tAttrs: label ? { "aria-label": label } : null,
  });
  const count = h("span", { class: "op-operation-count", dataset: { testid: "operation-count" } });
  const message = h("p", { class: "op-muted", dataset: { testid: "operation-message" } });
  const actions = h("div", { class: "op-operation-actions" });
  const view = h(
    "div",
    {
      class: "op-operation",
      role: "status",
      dataset: { testid: "operation", kind: operation.kind, operationId: operation.id },
    },
    h("div", { class: "op-operation-head" }, title, count),
    bar,
    message,
    actions,
  );
  host.append(view);

  const show = (current) => {
    view.dataset.state = current.state;
    const isRunning = !ENDED.has(current.state);
    const total = Math.max(current.total ?? 0, current.done ?? 0);
    if (current.state === "done") {
      bar.max = Math.max(total, 1);
      bar.value = bar.max;
    } else if (total > 0) {
      bar.max = total;
      bar.value = current.done;
    } else if (isRunning) {
      bar.removeAttribute("value"); // indeterminate until the total is known
    } else {
      bar.max = 1;
      bar.value = 0; // failed before it counted anything
    }
    if (current.state === "stalled") setText(count, "operationStalled");
    else if (current.state === "done") setText(count, "operationDone");
    else if (!isRunning) setText(count, "operationFailed");
    else if (total > 0) setText(count, ["operationProgress", { done: current.done, total }]);
    else setText(count, "operationStarting");
    message.textContent = current.message ?? "";
    message.hidden = !current.message;
  };

  const finished = (current) => {
    if (current.state === "done" && current.result_url) {
      const name = `tally-${current.kind}-${current.tenant_id}-${current.id}.json`;
      const button = h(
        "button",
        { type: "button", class: "btn btn-small", dataset: { testid: "operation-download" } },
        h("span", { t: "operationDownload" }),
      );
      button.addEventListener("click", () => download(current.result_url, name).catch(fail));
      actions.replaceChildren(button);
    }
    onFinished(current);
  };

  show(operation);
  (async () => {
    let current = operation;
    while (!ENDED.has(current.state)) {
      await pause(POLL_EVERY_MS);
      if (!view.isConnected) return; // the operator left this view; the server carries on
      try {
        current = await admin.operation(current.id);
      } catch (err) {
        fail(err);
        onFinished(null);
        return;
      }
      show(current);
    }
    finished(current);
  })();
  return view;
}

/** Fetch `path` with the key and save it as a file, named as the server says or `fallbackName`. */
export async function download(path, fallbackName) {
  const response = await admin.file(path);
  const blob = await response.blob();
  const url = URL.createObjectURL(blob);
  const name = attachmentName(response.headers.get("Content-Disposition")) ?? fallbackName;
  const link = h("a", { href: url, download: name, hidden: true });
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(url), REVOKE_AFTER_MS);
}

/** The file name a Content-Disposition header gives, or null. */
function attachmentName(disposition) {
  const encoded = /filename\*\s*=\s*UTF-8''([^;]+)/i.exec(disposition ?? "");
  if (encoded) return decodeURIComponent(encoded[1].trim());
  const plain = /filename\s*=\s*"?([^";]+)"?/i.exec(disposition ?? "");
  return plain ? plain[1].trim() : null;
}

function pause(ms) {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
