// The memory panel's two forms, drawn in its editor slot: add one fact by hand
// (`POST /api/memory/entries`, stored as a `manual` entry dated today) and edit the whole
// MEMORY.md as text (`PUT /api/memory`).

import { api } from "./api.js";
import { autosize, formActions, h, submitButton, toast } from "./dom.js";
import { refusal } from "./error_box.js";

/**
 * The "add memory" form in `slot`. One fact is one line: Enter saves, Escape cancels.
 * `onAdded()` runs once the server has stored it.
 */
export function addEntryForm(slot, { onAdded }) {
  const area = h("textarea", {
    class: "memory-text memory-entry-input",
    rows: 2,
    maxlength: 2000,
    dataset: { testid: "memory-add-input" },
    tAttrs: { "aria-label": "memoryAddLabel", placeholder: "memoryAddPlaceholder" },
  });
  const save = submitButton("save", "memory-add-save");
  save.disabled = true;
  const problem = h("div", { class: "memory-slot" });
  const close = () => slot.replaceChildren();
  const form = h(
    "form",
    { class: "summary-form memory-add-form", dataset: { testid: "memory-add-form" } },
    area,
    problem,
    formActions(close, save),
  );
  area.addEventListener("input", () => {
    autosize(area);
    save.disabled = !area.value.trim();
  });
  area.addEventListener("keydown", (event) => {
    if (event.key === "Escape") {
      event.stopPropagation(); // Escape closes the form, not the panel
      close();
    } else if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault(); // an entry is one line
      if (area.value.trim()) form.requestSubmit();
    }
  });
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    save.disabled = true;
    try {
      await api.addMemoryEntry(area.value);
      close();
      toast("memoryAdded");
      await onAdded();
    } catch (err) {
      save.disabled = false;
      problem.replaceChildren(refusal("memoryAddFailed", err));
    }
  });
  slot.replaceChildren(form);
  area.focus();
}

/** The whole MEMORY.md as text in `slot`; `onSaved()` runs once the server has stored it. */
export async function editTextForm(slot, { onSaved }) {
  let content;
  try {
    ({ content } = await api.memory());
  } catch (err) {
    toast({ raw: `${err.code}: ${err.message}` }, { isError: true });
    return;
  }
  const area = h("textarea", { class: "memory-text", rows: 10, spellcheck: "false" });
  area.value = content;
  const save = submitButton("save", "memory-text-save");
  const form = h(
    "form",
    { class: "summary-form" },
    area,
    formActions(() => slot.replaceChildren(), save),
  );
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    try {
      await api.saveMemory(area.value);
      slot.replaceChildren();
      toast("memorySaved");
      await onSaved();
    } catch (err) {
      toast({ raw: `${err.code}: ${err.message}` }, { isError: true });
    }
  });
  area.addEventListener("input", () => autosize(area));
  slot.replaceChildren(form);
  area.focus();
}
