// Inline Markdown as DOM nodes: code spans, bold, italic, strikethrough, links, autolinks.
// Model output is untrusted: text becomes text nodes, links keep only http(s) and mailto
// addresses, and images are never loaded (they become links).

import { h, icon } from "./dom.js";

const SAFE_PROTOCOLS = new Set(["http:", "https:", "mailto:"]);
const ESCAPABLE = /[!-/:-@[-`{-~]/;

/** Append `text`'s inline Markdown to `parent`; return `parent`. */
export function inline(text, parent) {
  let buffer = "";
  const flush = () => {
    if (buffer) parent.append(document.createTextNode(buffer));
    buffer = "";
  };
  let i = 0;
  while (i < text.length) {
    const c = text[i];
    if (c === "\\" && ESCAPABLE.test(text[i + 1] ?? "")) {
      buffer += text[i + 1];
      i += 2;
      continue;
    }
    const found = codeSpan(text, i) ?? emphasis(text, i) ?? link(text, i) ?? autolink(text, i);
    if (found) {
      flush();
      parent.append(found.node);
      i = found.end;
      continue;
    }
    buffer += c;
    i += 1;
  }
  flush();
  return parent;
}

function runLength(text, i, c) {
  let n = 0;
  while (text[i + n] === c) n += 1;
  return n;
}

function codeSpan(text, i) {
  if (text[i] !== "`") return null;
  const n = runLength(text, i, "`");
  let j = text.indexOf("`".repeat(n), i + n);
  while (j !== -1 && runLength(text, j, "`") !== n) {
    j = text.indexOf("`".repeat(n), j + runLength(text, j, "`"));
  }
  if (j === -1) return null;
  let content = text.slice(i + n, j);
  if (/^ .*\S.* $/.test(content)) content = content.slice(1, -1);
  return { node: h("code", {}, content), end: j + n };
}

const EMPHASIS = [
  { delim: "***", wrap: (inner) => h("strong", {}, inline(inner, h("em"))) },
  { delim: "___", wrap: (inner) => h("strong", {}, inline(inner, h("em"))) },
  { delim: "**", wrap: (inner) => inline(inner, h("strong")) },
  { delim: "__", wrap: (inner) => inline(inner, h("strong")) },
  { delim: "~~", wrap: (inner) => inline(inner, h("del")) },
  { delim: "*", wrap: (inner) => inline(inner, h("em")) },
  { delim: "_", wrap: (inner) => inline(inner, h("em")) },
];

function emphasis(text, i) {
  const c = text[i];
  if (c !== "*" && c !== "_" && c !== "~") return null;
  const run = runLength(text, i, c);
  // `snake_case_names` stay as they are: underscores only open at a word boundary.
  if (c === "_" && /[\p{L}\p{N}]/u.test(text[i - 1] ?? "")) return null;
  for (const { delim, wrap } of EMPHASIS) {
    if (delim[0] !== c || delim.length > run) continue;
    if (delim.length !== run && run <= 3 && delim.length < run) continue;
    const open = i + delim.length;
    if (!text[open] || /\s/.test(text[open])) continue;
    const close = findClose(text, open, delim);
    if (close === -1) continue;
    if (c === "_" && /[\p{L}\p{N}]/u.test(text[close + delim.length] ?? "")) continue;
    return { node: wrap(text.slice(open, close)), end: close + delim.length };
  }
  return null;
}

function findClose(text, from, delim) {
  const c = delim[0];
  for (let j = from + 1; j < text.length; j += 1) {
    if (text[j] === "\\") {
      j += 1;
      continue;
    }
    if (text[j] === "`") {
      const skip = codeSpan(text, j);
      if (skip) {
        j = skip.end - 1;
        continue;
      }
    }
    if (text[j] !== c) continue;
    const run = runLength(text, j, c);
    if (run === delim.length && !/\s/.test(text[j - 1])) return j;
    j += run - 1;
  }
  return -1;
}

/** The address if it is safe to link to (http, https, mailto), else null. */
export function safeUrl(raw) {
  const value = String(raw).trim();
  try {
    const url = new URL(value);
    return SAFE_PROTOCOLS.has(url.protocol) ? url.href : null;
  } catch {
    return null;
  }
}

function anchor(href, children) {
  return h("a", { href, target: "_blank", rel: "noopener noreferrer nofollow ugc" }, children);
}

function link(text, i) {
  const isImage = text[i] === "!" && text[i + 1] === "[";
  if (text[i] !== "[" && !isImage) return null;
  const open = isImage ? i + 1 : i;
  let depth = 0;
  let close = -1;
  for (let j = open; j < text.length; j += 1) {
    if (text[j] === "\\") j += 1;
    else if (text[j] === "[") depth += 1;
    else if (text[j] === "]" && --depth === 0) {
      close = j;
      break;
    }
  }
  if (close === -1 || text[close + 1] !== "(") return null;
  let parens = 0;
  let end = -1;
  for (let j = close + 1; j < text.length; j += 1) {
    if (text[j] === "(") parens += 1;
    else if (text[j] === ")" && --parens === 0) {
      end = j;
      break;
    }
  }
  if (end === -1) return null;
  const label = text.slice(open + 1, close);
  const target = text
    .slice(close + 2, end)
    .trim()
    .replace(/\s+"[^"]*"$/, "");
  const href = safeUrl(target.replace(/^<|>$/g, ""));
  // Images are never loaded from model output: they become a link to the picture.
  const content = isImage
    ? [icon("image", "icon md-image-icon"), label || target]
    : [inline(label, document.createDocumentFragment())];
  const node = href ? anchor(href, content) : h("span", { class: "md-unsafe-link" }, content);
  return { node, end: end + 1 };
}

function autolink(text, i) {
  if (text[i] === "<") {
    const match = /^<(https?:\/\/[^\s<>]+|mailto:[^\s<>]+)>/.exec(text.slice(i));
    const href = match && safeUrl(match[1]);
    return href ? { node: anchor(href, [match[1]]), end: i + match[0].length } : null;
  }
  if (text[i] !== "h" || /[\p{L}\p{N}]/u.test(text[i - 1] ?? "")) return null;
  const match = /^https?:\/\/[^\s<>"'`]+/.exec(text.slice(i, i + 2048));
  if (!match) return null;
  let url = match[0];
  while (/[.,;:!?*_~]$/.test(url) || (url.endsWith(")") && !url.includes("("))) {
    url = url.slice(0, -1);
  }
  const href = safeUrl(url);
  return href ? { node: anchor(href, [url]), end: i + url.length } : null;
}
