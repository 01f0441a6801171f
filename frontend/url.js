// The addresses the page requests and links to. A value placed in a path (or a query) is
// encoded here, and only here, so an id that holds "/" or "?" stays one segment.

/** A path with each `${value}` encoded: path`/api/chat/sessions/${id}/messages`. */
export function path(strings, ...values) {
  return values.reduce(
    (out, value, i) => out + encodeURIComponent(value) + strings[i + 1],
    strings[0],
  );
}

/** `params` as a query (`?a=1&b=2`), leaving out the empty ones; nothing when none is left. */
export function query(params) {
  const pairs = Object.entries(params).filter(([, v]) => v !== undefined && v !== null && v !== "");
  return pairs.length ? `?${new URLSearchParams(pairs)}` : "";
}
