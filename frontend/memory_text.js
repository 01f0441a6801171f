// Editing one entry of MEMORY.md in place. The server stores the whole text (`PUT /api/memory`);
// the page rewrites only the entry's own line and hands every other line back exactly as read.
// Line format (backend/memory/entries.py): `YYYY-MM-DD|source|content`, one entry per line.

const ENTRY_LINE = /^(\d{4}-\d{2}-\d{2})\|([^|]*)\|([\s\S]*)$/;
const BREAKS = /[\x00-\x1f\x7f-\x9f\u2028\u2029]+/g;

/** As the server neutralises a field: one line, no control characters, no `|`. */
export function neutralise(text) {
  return text
    .replace(/\p{Cs}/gu, "\ufffd")
    .replace(BREAKS, " ")
    .replaceAll("|", "¦")
    .trim();
}

/** The source field an entry of `GET /api/memory` was read from: kind, then any provenance. */
export function sourceField({ source, provenance }) {
  if (!provenance) return source;
  const { session_id: id, first_message_id: first, last_message_id: last } = provenance;
  return `${source}@${id}:${first}-${last}`;
}

class EntryNotFound extends Error {
  constructor() {
    super("the entry is not in the memory text any more");
    this.code = "entry_changed";
  }
}

/**
 * `content` (the whole MEMORY.md text) with entry `entry`'s content replaced by `text`.
 * The entry's line is the one whose fields read as the entry's; a line repeated n times has
 * ids `<hash>`, `<hash>-2`, ... in order, so the id's suffix picks among equal lines.
 * Throws (code `entry_changed`) when no such line exists.
 */
export function replaceEntry(content, entry, text) {
  const lines = content.split("\n");
  const source = sourceField(entry);
  const matches = [];
  lines.forEach((line, index) => {
    const fields = ENTRY_LINE.exec(line);
    if (!fields || fields[1] !== entry.date) return;
    if (neutralise(fields[2]) === source && neutralise(fields[3]) === entry.content) {
      matches.push({ index, fields });
    }
  });
  const copy = Number(/-(\d+)$/.exec(entry.id)?.[1] ?? 1);
  const match = matches[copy - 1];
  if (!match) throw new EntryNotFound();
  const [, date, rawSource] = match.fields;
  lines[match.index] = `${date}|${rawSource}|${neutralise(text)}`;
  return lines.join("\n");
}
