// Tally's web page: wires the sidebar, the thread, the composer and the streamed turn.
// The URL names the open session (`#/s/<id>`; `?session=<id>` is accepted too).

import { api, apiKey, onUnauthorized, setApiKey } from "./api.js";
import { SignIn } from "./auth.js";
import { DemoBanner } from "./banner.js";
import { Composer } from "./composer.js";
import { setText, toast } from "./dom.js";
import { ContextGauge } from "./gauge.js";
import { addStrings, applyI18n, language, onLanguageChange, setLanguage } from "./i18n.js";
import { PAGE_STRINGS } from "./i18n_page.js";
import { useMemoryScope } from "./identity.js";
import { LastTurnActions } from "./last_turn.js";
import { MemoryPanel } from "./memory.js";
import { setAssistantName } from "./reply.js";
import { editInline, SessionList } from "./sessions.js";
import { startThemeToggle } from "./theme.js";
import { Thread } from "./thread.js";
import { Turn } from "./turn.js";
import { path } from "./url.js";

addStrings(PAGE_STRINGS); // before anything is drawn

const $ = (id) => document.getElementById(id);

const state = {
  sessionId: undefined, // undefined: nothing opened yet; null: a new, unsaved chat
  session: null,
  isDemo: false,
  turns: new Map(), // session id → the turn streaming in it
  turnsStarted: 0, // every turn begun on this page: a redraw loaded before one is stale
  turnsEnded: 0, // every turn ended on this page: a redraw loaded before one may lack its reply
  contexts: new Map(), // session id → {tokens, budget} of its last completed turn
};

const thread = new Thread($("messages"), {
  onSummaryState: (summaryState) => {
    $("summary-add-button").hidden = summaryState !== "none";
  },
  onRetry: (failed) => retryStored(failed),
});
const composer = new Composer($("composer"), {
  onSend: (text, images) => send(text, null, images),
  onStop: () => stop(),
});
const sessions = new SessionList($("session-list"), $("session-search"), {
  onRenamed: (session) => session.id === state.sessionId && showTitle(session),
  onDeleted: (id) => {
    if (id === state.sessionId) location.hash = "#/";
  },
});
const memory = new MemoryPanel($("memory-panel"), $("memory-button"), $("backdrop"), {
  titleOf: (id) => sessions.sessions.find((session) => session.id === id)?.title || null,
  onReverted: (id) => reloadSession(id),
});
// Regenerate and edit-and-resend: each a new turn, sent like any other.
const lastTurn = new LastTurnActions({ onResend: (text, images) => send(text, null, images) });
const gauge = new ContextGauge($("context-gauge"));
const demoBanner = new DemoBanner($("demo-banner"));
const signIn = new SignIn({
  titleKey: "signInTitle",
  promptKey: "signInPrompt",
  onSignedIn: () => boot(),
});
$("toasts").before(signIn.overlay);
onUnauthorized(() => signIn.show());

// ---- header, theme, language, sidebar ------------------------------------------------------

const chatTitle = $("chat-title"); // kept: a rename box stands in for it while open

function showTitle(session) {
  if (session?.title) {
    delete chatTitle.dataset.i18n;
    chatTitle.textContent = session.title;
  } else setText(chatTitle, "untitled");
  $("rename-button").hidden = !session;
  if (!session) $("summary-add-button").hidden = true; // the thread shows it with the session
  document.title = session?.title ? `${session.title} · Tally` : "Tally";
}

let titleEditor = null; // the open rename box in the header, if any

$("rename-button").addEventListener("click", () => {
  const session = state.session;
  if (!session || titleEditor) return;
  const save = async (title) => {
    try {
      const renamed = await api.renameSession(session.id, title);
      if (state.session?.id === renamed.id) {
        state.session = renamed;
        showTitle(renamed);
      }
      toast("renamed");
      await sessions.refresh();
    } catch (err) {
      toast({ raw: `${err.code}: ${err.message}` }, { isError: true });
    }
  };
  titleEditor = editInline(chatTitle, session.title, save, {
    onClose: () => {
      titleEditor = null;
    },
  });
});

$("summary-add-button").addEventListener("click", () => thread.editSummary());

$("lang-toggle").addEventListener("click", () => setLanguage(language() === "zh" ? "en" : "zh"));
onLanguageChange(() => {
  sessions.render();
  gauge.render();
});

function openSidebar() {
  document.body.classList.add("sidebar-open");
}

function closeSidebar() {
  document.body.classList.remove("sidebar-open");
}

$("menu-button").addEventListener("click", openSidebar);
$("memory-button").addEventListener("click", closeSidebar); // the panel opens over the chat
$("sidebar-close").addEventListener("click", closeSidebar);
$("sidebar-scrim").addEventListener("click", closeSidebar);
$("new-chat").addEventListener("click", () => {
  closeSidebar();
  if (location.hash === "#/" || !location.hash) openRoute();
  else location.hash = "#/";
});

document.addEventListener("keydown", (event) => {
  if (event.key !== "Escape") return;
  memory.close();
  closeSidebar();
});

$("sign-out").addEventListener("click", () => {
  setApiKey(null);
  location.reload();
});

// ---- routing -------------------------------------------------------------------------------

function routeId() {
  const match = location.hash.match(/^#\/s\/([^/?#]+)$/);
  return match ? decodeURIComponent(match[1]) : null;
}

async function openRoute() {
  const id = routeId();
  closeSidebar();
  if (id && id === state.sessionId && state.session) return; // already open
  titleEditor?.cancel(); // a rename box still open belongs to the conversation being left
  state.sessionId = id;
  state.session = null;
  sessions.setActive(id);
  showTitle(null);
  gauge.show(state.contexts.get(id) ?? null);
  updateComposer();
  if (!id) {
    thread.empty((text) => send(text));
    composer.focusIfIdle();
    return;
  }
  thread.loading();
  try {
    const session = await api.getSession(id);
    if (state.sessionId !== id) return;
    state.session = session;
    showTitle(session);
    await drawSession(session);
    offerLastTurnActions();
    composer.focusIfIdle();
  } catch (err) {
    if (state.sessionId !== id) return;
    if (err.status === 404) {
      toast("sessionGone", { isError: true });
      location.hash = "#/";
    } else if (err.status !== 401) toast({ raw: `${err.code}: ${err.message}` }, { isError: true });
  }
}

/**
 * Draw `session` from the server, with its reply still streaming if one is. A turn that ends
 * while the messages load may be missing from them, and is no longer live to be drawn again:
 * then they are loaded again. False when another session was opened meanwhile.
 */
async function drawSession(session) {
  for (;;) {
    const ended = state.turnsEnded;
    if (!(await thread.show(session, { isDemo: state.isDemo }))) return false;
    if (state.turnsEnded === ended) {
      reattachTurn(session.id);
      return true;
    }
  }
}

/** Coming back to a session whose reply is still streaming: show the live reply again. */
function reattachTurn(sessionId) {
  const turn = state.turns.get(sessionId);
  if (!turn) return;
  for (const el of thread.window.querySelectorAll(".msg")) {
    if (el.dataset.turnId && el.dataset.turnId === turn.turnId) el.remove();
  }
  thread.append(turn.userEl);
  thread.append(turn.view.el);
  thread.scrollToBottom();
}

/** Draw an open session again from the server (a memory revert gave it messages back). */
async function reloadSession(sessionId) {
  await sessions.refresh().catch(() => {});
  if (state.sessionId !== sessionId || state.turns.has(sessionId)) return;
  try {
    const session = await api.getSession(sessionId);
    if (state.sessionId !== sessionId) return;
    state.session = session;
    if (await drawSession(session)) offerLastTurnActions();
  } catch {
    // the next navigation reloads it
  }
}

window.addEventListener("hashchange", openRoute);

// ---- sending ---------------------------------------------------------------------------------

function updateComposer() {
  const isBusy = state.turns.has(state.sessionId);
  composer.setBusy(isBusy);
  $("messages").setAttribute("aria-busy", String(isBusy));
  offerLastTurnActions();
}

/** Regenerate and edit-and-resend on the open conversation's last turn, unless one runs. */
function offerLastTurnActions() {
  lastTurn.update(thread.window, { isBusy: state.turns.has(state.sessionId) });
}

function titleFrom(text) {
  const line = text.trim().split("\n")[0].replace(/\s+/g, " ");
  return line.length > 60 ? `${line.slice(0, 59)}…` : line;
}

async function ensureSession(text) {
  if (state.sessionId) return state.sessionId;
  const session = await api.createSession({ title: titleFrom(text), channel: "web" });
  state.sessionId = session.id;
  state.session = session;
  location.hash = path`#/s/${session.id}`; // openRoute sees it is open already
  showTitle(session);
  sessions.setActive(session.id);
  await thread.show(session, { isDemo: state.isDemo });
  sessions.refresh();
  return session.id;
}

/**
 * Send `text` (and `images`, as message parts) and stream the reply. `retryOf`: a failed turn
 * sent again, with its own text and images.
 */
async function send(rawText, retryOf = null, images = []) {
  const text = rawText.trim();
  const pictures = retryOf?.images ?? images;
  if ((!text && !pictures.length) || state.turns.has(state.sessionId)) return;
  let sessionId;
  try {
    sessionId = await ensureSession(text);
  } catch (err) {
    toast({ raw: `${err.code ?? "error"}: ${err.message}` }, { isError: true });
    return; // the composer still holds the text
  }
  const turn = new Turn({ sessionId, text, images: pictures, isDemo: state.isDemo, retryOf });
  if (!turn.userEl.isConnected) thread.append(turn.userEl);
  thread.append(turn.view.el);
  thread.scrollToBottom();
  state.turns.set(sessionId, turn);
  state.turnsStarted += 1;
  updateComposer();
  await turn.run({
    // Stored: the box can let go of the text (if it is still this session's box).
    onStarted: () => state.sessionId === sessionId && composer.clearIf(text, pictures),
    onEvent: (apply) => {
      const isFollowing = state.sessionId === sessionId && thread.isNearBottom;
      apply();
      if (isFollowing) thread.scrollToBottom();
    },
    onRetry: (failed) => {
      if (state.turns.has(failed.sessionId)) return;
      failed.prepareRetry();
      send(failed.text, failed);
    },
  });
  state.turns.delete(sessionId);
  state.turnsEnded += 1;
  if (turn.context) state.contexts.set(sessionId, turn.context);
  if (state.sessionId === sessionId) gauge.show(state.contexts.get(sessionId) ?? null);
  updateComposer();
  afterTurn(sessionId);
}

/**
 * Retry a failed turn drawn from storage (after a reload): the key the server kept with it
 * resumes the same turn, so no second user message is stored.
 */
function retryStored({ text, images, key, userEl, view }) {
  if (state.turns.has(state.sessionId)) return;
  view.removeRetry();
  if (!view.replyText) view.el.remove();
  send(text, { key, images, userEl });
}

function stop() {
  const turn = state.turns.get(state.sessionId);
  if (!turn) return;
  composer.setStopping();
  turn.stop();
}

/**
 * Refresh the list and the session (a compaction may have moved its window and summary), and
 * what waits for the person's OK (the turn may have proposed a line to remember).
 */
async function afterTurn(sessionId) {
  memory.turnEnded();
  try {
    await sessions.refresh();
    if (state.sessionId !== sessionId) return;
    const session = await api.getSession(sessionId);
    if (state.sessionId !== sessionId) return;
    state.session = session;
    // Against what the page shows: a redraw given up is tried again after the next turn.
    const isWindowMoved = session.window_start_id !== thread.drawnWindowStart;
    const started = state.turnsStarted;
    const isBusy = () => state.turns.has(sessionId) || state.turnsStarted !== started;
    const isRedrawn =
      isWindowMoved && !isBusy() && (await thread.show(session, { isDemo: state.isDemo, isBusy }));
    if (isRedrawn) offerLastTurnActions();
    else thread.updateSession(session);
  } catch {
    // the next navigation reloads it
  }
}

// ---- start-up ------------------------------------------------------------------------------

async function showHealth() {
  const pill = $("model-pill");
  try {
    const health = await api.health();
    // "degraded" may mean a provider failed; the toast speaks of the database only.
    if (health.database !== "ok") toast("degraded", { isError: true });
    state.isDemo = health.is_demo;
    setAssistantName(health.assistant_name);
    useMemoryScope(health.memory_scope); // before any session or memory request names a user
    memory.configure(health);
    demoBanner.show(health);
    pill.textContent = health.is_demo ? "" : health.model;
    pill.title = `${health.provider} · ${health.model}`;
    pill.hidden = !pill.textContent;
  } catch (err) {
    if (err.status !== 401) toast("networkError", { isError: true });
  }
}

async function boot() {
  $("sign-out").hidden = !apiKey();
  await showHealth();
  try {
    await Promise.all([sessions.refresh(), memory.probe()]);
  } catch (err) {
    if (err.status === 401) return; // the sign-in form is up; it boots again
    if (err.status === 403 && apiKey()) {
      // a disabled tenant's key, or the operator's (it manages tenants but has none to chat in)
      signIn.show(err.code === "tenant_disabled" ? "tenantDisabled" : "keyForbidden");
      return;
    }
    toast({ raw: `${err.code}: ${err.message}` }, { isError: true });
  }
  state.sessionId = undefined;
  await openRoute();
}

function start() {
  startThemeToggle($("theme-toggle"));
  const linked = new URLSearchParams(location.search).get("session");
  if (linked) history.replaceState(null, "", path`/#/s/${linked}`);
  composer.setPlaceholder("placeholder");
  applyI18n();
  boot();
}

start();
