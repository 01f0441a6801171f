// A small Markdown renderer that builds DOM nodes directly. Model output is untrusted: every
// character becomes a text node or the text of an element created here, raw HTML is shown as
// text, images become links, and links keep only http(s) and mailto addresses.
//
// Supported: paragraphs, line breaks, headings, fenced code (with a copy button), block
// quotes, nested lists, tables, rules; inline code, bold, italic, strikethrough, links,
// autolinks. An unclosed code fence (a reply still streaming) runs to the end.

import { copyButton, h } from "./dom.js";
import { inline } from "./markdown_inline.js";

const FENCE = /^ {0,3}(`{3,}|~{3,})\s*([^\s`]*)[^`]*$/;
const HEADING = /^ {0,3}(#{1,6})(?:\s+(.*?))?(?:\s+#+)?\s*$/;
const RULE = /^ {0,3}([-*_])(?:\s*\1){2,}\s*$/;
const QUOTE = /^ {0,3}>\s?(.*)$/;
const LIST_ITEM = /^( *)([-*+]|\d{1,9}[.)])(\s+|$)(.*)$/;
const TABLE_DIVIDER = /^\s*\|?\s*:?-{1,}:?\s*(\|\s*:?-{1,}:?\s*)*\|?\s*$/;

/** Render `source` into a fresh DocumentFragment. */
export function renderMarkdown(source) {
  const fragment = document.createDocumentFragment();
  renderBlocks(
    String(source ?? "")
      .replace(/\r\n?/g, "\n")
      .split("\n"),
    fragment,
  );
  return fragment;
}

function renderBlocks(lines, parent) {
  let i = 0;
  while (i < lines.length) {
    const line = lines[i];
    if (!line.trim()) {
      i += 1;
      continue;
    }
    let match;
    if ((match = line.match(FENCE))) i = codeBlock(lines, i, match, parent);
    else if ((match = line.match(HEADING))) {
      const level = match[1].length;
      parent.append(inline(match[2] ?? "", h(`h${Math.min(level + 1, 6)}`, { class: "md-h" })));
      i += 1;
    } else if (RULE.test(line)) {
      parent.append(h("hr"));
      i += 1;
    } else if (QUOTE.test(line)) i = blockQuote(lines, i, parent);
    else if (LIST_ITEM.test(line) && LIST_ITEM.exec(line)[4].trim()) i = list(lines, i, parent);
    else if (isTableStart(lines, i)) i = table(lines, i, parent);
    else i = paragraph(lines, i, parent);
  }
}

function startsBlock(lines, i) {
  const line = lines[i];
  return (
    FENCE.test(line) ||
    HEADING.test(line) ||
    RULE.test(line) ||
    QUOTE.test(line) ||
    (LIST_ITEM.test(line) && LIST_ITEM.exec(line)[4].trim() !== "") ||
    isTableStart(lines, i)
  );
}

function codeBlock(lines, start, match, parent) {
  const [, fence, info] = match;
  const indent = lines[start].length - lines[start].trimStart().length;
  const body = [];
  let i = start + 1;
  while (i < lines.length) {
    const close = lines[i].trim();
    if (close.startsWith(fence[0].repeat(fence.length)) && /^[`~]+$/.test(close)) {
      i += 1;
      break;
    }
    body.push(lines[i].slice(Math.min(indent, lines[i].length - lines[i].trimStart().length)));
    i += 1;
  }
  const code = body.join("\n");
  const language = /^[\w+#.-]{1,24}$/.test(info) ? info.toLowerCase() : "";
  parent.append(
    h(
      "div",
      { class: "code-block" },
      h(
        "div",
        { class: "code-head" },
        h("span", { class: "code-lang" }, language || "text"),
        copyButton(() => code, { className: "copy-btn code-copy" }),
      ),
      h("pre", {}, h("code", { dataset: language ? { language } : {} }, code)),
    ),
  );
  return i;
}

function blockQuote(lines, start, parent) {
  const inner = [];
  let i = start;
  while (i < lines.length && lines[i].trim()) {
    const match = lines[i].match(QUOTE);
    inner.push(match ? match[1] : lines[i]);
    i += 1;
  }
  const quote = h("blockquote");
  renderBlocks(inner, quote);
  parent.append(quote);
  return i;
}

function indentOf(line) {
  return line.length - line.trimStart().length;
}

function list(lines, start, parent) {
  const first = LIST_ITEM.exec(lines[start]);
  const baseIndent = first[1].length;
  const isOrdered = /\d/.test(first[2]);
  const el = h(isOrdered ? "ol" : "ul");
  const number = parseInt(first[2], 10);
  if (isOrdered && number !== 1) el.setAttribute("start", String(number));
  const items = [];
  let isLoose = false; // a blank line inside the list: items keep their paragraphs
  let item = null;
  let contentIndent = 0;
  let i = start;
  while (i < lines.length) {
    const line = lines[i];
    const match = LIST_ITEM.exec(line);
    const isSibling =
      match && match[1].length <= baseIndent + 1 && /\d/.test(match[2]) === isOrdered;
    if (isSibling && match[4].trim()) {
      item = { lines: [match[4]], el: h("li") };
      items.push(item);
      el.append(item.el);
      contentIndent = match[1].length + match[2].length + match[3].length;
      i += 1;
    } else if (!line.trim()) {
      const next = lines.slice(i + 1).find((l) => l.trim());
      if (next === undefined || indentOf(next) < Math.min(contentIndent, baseIndent + 2)) {
        const nextMatch = next && LIST_ITEM.exec(next);
        if (!(nextMatch && nextMatch[1].length <= baseIndent + 1)) break;
      }
      item?.lines.push("");
      isLoose = true;
      i += 1;
    } else if (indentOf(line) >= baseIndent + 2) {
      item.lines.push(line.slice(Math.min(indentOf(line), contentIndent)));
      i += 1;
    } else if (item && lines[i - 1].trim() && !startsBlock(lines, i)) {
      item.lines.push(line.trim()); // a lazy continuation of the item's paragraph
      i += 1;
    } else break;
  }
  // Items are rendered once the whole list is read, so their continuation lines are complete.
  for (const li of items) {
    renderBlocks(li.lines, li.el);
    if (isLoose) continue;
    for (const p of [...li.el.children].filter((child) => child.tagName === "P")) {
      p.replaceWith(...p.childNodes);
    }
  }
  parent.append(el);
  return i;
}

function isTableStart(lines, i) {
  return (
    i + 1 < lines.length &&
    lines[i].includes("|") &&
    TABLE_DIVIDER.test(lines[i + 1]) &&
    lines[i + 1].includes("-")
  );
}

function splitRow(line) {
  let row = line.trim();
  if (row.startsWith("|")) row = row.slice(1);
  if (row.endsWith("|") && !row.endsWith("\\|")) row = row.slice(0, -1);
  const cells = [];
  let cell = "";
  for (let i = 0; i < row.length; i += 1) {
    if (row[i] === "\\" && row[i + 1] === "|") {
      cell += "|";
      i += 1;
    } else if (row[i] === "|") {
      cells.push(cell.trim());
      cell = "";
    } else cell += row[i];
  }
  cells.push(cell.trim());
  return cells;
}

function table(lines, start, parent) {
  const header = splitRow(lines[start]);
  const aligns = splitRow(lines[start + 1]).map((spec) => {
    if (spec.startsWith(":") && spec.endsWith(":")) return "center";
    if (spec.endsWith(":")) return "right";
    return spec.startsWith(":") ? "left" : null;
  });
  const cell = (tag, text, index) =>
    inline(text, h(tag, { class: aligns[index] ? `align-${aligns[index]}` : null }));
  const head = h(
    "thead",
    {},
    h(
      "tr",
      {},
      header.map((text, n) => cell("th", text, n)),
    ),
  );
  const body = h("tbody");
  let i = start + 2;
  while (i < lines.length && lines[i].trim() && lines[i].includes("|")) {
    const cells = splitRow(lines[i]);
    body.append(
      h(
        "tr",
        {},
        header.map((_, n) => cell("td", cells[n] ?? "", n)),
      ),
    );
    i += 1;
  }
  parent.append(h("div", { class: "table-wrap" }, h("table", {}, head, body)));
  return i;
}

function paragraph(lines, start, parent) {
  const text = [lines[start].trim()];
  let i = start + 1;
  while (i < lines.length && lines[i].trim() && !startsBlock(lines, i)) {
    text.push(lines[i].trim());
    i += 1;
  }
  const p = h("p");
  text.forEach((line, n) => {
    if (n > 0) p.append(h("br"));
    inline(line, p);
  });
  parent.append(p);
  return i;
}
