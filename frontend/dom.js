// DOM building. Text always enters the page as text nodes or textContent, never as markup:
// nothing here parses HTML, so no string can become an element.

import { t } from "./i18n.js";

const SVG = "http://www.w3.org/2000/svg";

/**
 * h("button", {class: "x", t: "send", onclick}, child, ...)
 * Props: `class`, `dataset`, `on<event>`, `t` (a translated text key, kept live through
 * `data-i18n`), `tAttrs` ({attr: key}, kept live through `data-i18n-attr`), other attributes.
 */
export function h(tag, props = {}, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(props)) {
    if (value === null || value === undefined || value === false) continue;
    if (key === "class") el.className = value;
    else if (key === "dataset") Object.assign(el.dataset, value);
    else if (key === "t") setText(el, value);
    else if (key === "tAttrs") setAttrs(el, value);
    else if (key.startsWith("on")) el.addEventListener(key.slice(2), value);
    else if (value === true) el.setAttribute(key, "");
    else el.setAttribute(key, String(value));
  }
  append(el, children);
  return el;
}

/** A translated text that follows language changes: key, or [key, vars]. */
export function setText(el, spec) {
  const [key, vars] = Array.isArray(spec) ? spec : [spec, undefined];
  el.dataset.i18n = key;
  if (vars) el.dataset.i18nVars = JSON.stringify(vars);
  else delete el.dataset.i18nVars;
  el.textContent = t(key, vars);
}

/** Translated attributes ({attr: key}) that follow language changes; `vars` fill them in. */
export function setAttrs(el, attrs, vars = undefined) {
  el.dataset.i18nAttr = Object.entries(attrs)
    .map(([attr, key]) => `${attr}:${key}`)
    .join(";");
  if (vars) el.dataset.i18nAttrVars = JSON.stringify(vars);
  for (const [attr, key] of Object.entries(attrs)) el.setAttribute(attr, t(key, vars));
}

export function append(el, children) {
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

// Stroke icons, 24×24. Circles are written as two arcs so every icon is one path list.
const circle = (cx, cy, r) =>
  `M${cx - r} ${cy}a${r} ${r} 0 1 0 ${2 * r} 0a${r} ${r} 0 1 0 ${-2 * r} 0`;
const ICONS = {
  plus: ["M12 5v14M5 12h14"],
  x: ["M18 6 6 18M6 6l12 12"],
  search: [circle(11, 11, 7), "m20 20-4-4"],
  trash: ["M3 6h18M8 6V4h8v2M19 6l-1 14H6L5 6M10 11v5M14 11v5"],
  pencil: ["M12 20h9", "M16.5 3.5a2.1 2.1 0 0 1 3 3L7 19l-4 1 1-4Z"],
  menu: ["M4 6h16M4 12h16M4 18h16"],
  sun: [
    circle(12, 12, 4),
    "M12 2v2M12 20v2M4.9 4.9l1.4 1.4M17.7 17.7l1.4 1.4M2 12h2M20 12h2M4.9 19.1l1.4-1.4M17.7 6.3l1.4-1.4",
  ],
  moon: ["M21 12.8A9 9 0 1 1 11.2 3a7 7 0 0 0 9.8 9.8Z"],
  send: ["M12 19V5M5 12l7-7 7 7"],
  copy: ["M9 9h11v11H9z", "M5 15H4V4h11v1"],
  check: ["M20 6 9 17l-5-5"],
  tool: [
    "M14.7 6.3a1 1 0 0 0 0 1.4l1.6 1.6a1 1 0 0 0 1.4 0l3.8-3.8a6 6 0 0 1-7.9 7.9l-6.9 6.9a2.1 2.1 0 0 1-3-3l6.9-6.9a6 6 0 0 1 7.9-7.9l-3.8 3.8Z",
  ],
  memory: [
    "M4 19.5A2.5 2.5 0 0 1 6.5 17H20V2H6.5A2.5 2.5 0 0 0 4 4.5v15A2.5 2.5 0 0 0 6.5 22H20v-5",
  ],
  globe: [circle(12, 12, 10), "M2 12h20M12 2a15 15 0 0 1 0 20M12 2a15 15 0 0 0 0 20"],
  logout: ["M9 21H5a2 2 0 0 1-2-2V5a2 2 0 0 1 2-2h4M16 17l5-5-5-5M21 12H9"],
  retry: ["M3 12a9 9 0 0 1 15.5-6.3L21 8M21 3v5h-5M21 12a9 9 0 0 1-15.5 6.3L3 16M3 21v-5h5"],
  alert: [circle(12, 12, 10), "M12 8v4M12 16h.01"],
  chevronUp: ["m18 15-6-6-6 6"],
  chevronRight: ["m9 18 6-6-6-6"],
  note: ["M14 3H6a2 2 0 0 0-2 2v14a2 2 0 0 0 2 2h12a2 2 0 0 0 2-2V9Z", "M14 3v6h6M8 13h8M8 17h5"],
  spark: [
    "M12 3v4M12 17v4M3 12h4M17 12h4M6.3 6.3l2.5 2.5M15.2 15.2l2.5 2.5M6.3 17.7l2.5-2.5M15.2 8.8l2.5-2.5",
  ],
  info: [circle(12, 12, 10), "M12 16v-4M12 8h.01"],
  image: ["M3 5h18v14H3z", circle(8.5, 9.5, 1.5), "m21 15-5-5L5 19"],
  layers: ["m12 3 9 5-9 5-9-5 9-5Z", "m3 13 9 5 9-5"],
  undo: ["M9 14 4 9l5-5", "M4 9h10.5a5.5 5.5 0 0 1 0 11H11"],
  chat: ["M21 12a8 8 0 0 1-11.6 7.1L3 21l1.9-6.4A8 8 0 1 1 21 12Z"],
  link: [
    "M10 13a5 5 0 0 0 7.5.5l3-3a5 5 0 0 0-7-7l-1.7 1.7",
    "M14 11a5 5 0 0 0-7.5-.5l-3 3a5 5 0 0 0 7 7l1.7-1.7",
  ],
};

export function icon(name, className = "icon") {
  const svg = document.createElementNS(SVG, "svg");
  svg.setAttribute("viewBox", "0 0 24 24");
  svg.setAttribute("class", className);
  svg.setAttribute("aria-hidden", "true");
  for (const d of ICONS[name] ?? []) {
    const path = document.createElementNS(SVG, "path");
    path.setAttribute("d", d);
    svg.append(path);
  }
  return svg;
}

/** A short-lived notice at the bottom of the screen. */
export function toast(textSpec, { isError = false } = {}) {
  const host = document.getElementById("toasts");
  const el = h("div", { class: `toast${isError ? " is-error" : ""}`, role: "status" });
  if (typeof textSpec === "string" || Array.isArray(textSpec)) setText(el, textSpec);
  else el.textContent = textSpec.raw;
  host.append(el);
  setTimeout(() => el.classList.add("is-leaving"), 3200);
  setTimeout(() => el.remove(), 3600);
}

/** A small form's row of actions: Cancel, then `primary` (its submit or confirm button). */
export function formActions(onCancel, primary) {
  return h(
    "div",
    { class: "summary-actions" },
    h(
      "button",
      { type: "button", class: "btn btn-small", onclick: onCancel },
      h("span", { t: "cancel" }),
    ),
    primary,
  );
}

/** The submit button of a small form, labelled by the i18n key `labelKey`. */
export function submitButton(labelKey, testid) {
  return h(
    "button",
    { type: "submit", class: "btn btn-primary btn-small", dataset: { testid } },
    h("span", { t: labelKey }),
  );
}

/** Grow a textarea with its content, up to its CSS max-height. */
export function autosize(textarea) {
  textarea.style.height = "auto";
  textarea.style.height = `${textarea.scrollHeight}px`;
}

export async function copyText(text) {
  try {
    await navigator.clipboard.writeText(text);
    return true;
  } catch {
    // The Clipboard API needs a secure context; plain-http LAN access falls back to this.
    const area = h("textarea", { class: "visually-hidden", readonly: true });
    area.value = text;
    document.body.append(area);
    area.select();
    const ok = document.execCommand("copy");
    area.remove();
    return ok;
  }
}

/** A button that copies `getText()` and says so for a moment. */
export function copyButton(getText, { labelKey = "copy", className = "copy-btn" } = {}) {
  const label = h("span", { t: labelKey });
  const button = h("button", { type: "button", class: className }, icon("copy"), label);
  button.addEventListener("click", async () => {
    if (!(await copyText(getText()))) return;
    button.replaceChildren(icon("check"), h("span", { t: "copied" }));
    button.classList.add("is-done");
    setTimeout(() => {
      button.replaceChildren(icon("copy"), h("span", { t: labelKey }));
      button.classList.remove("is-done");
    }, 1500);
  });
  return button;
}
