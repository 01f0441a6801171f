// Interface text in English and Chinese, and what shows it. Elements carry `data-i18n` (their
// text) and `data-i18n-attr` ("attr:key;attr:key"), so switching language re-labels the page in
// place. Each surface adds its own strings before it draws anything (the chat page
// i18n_page.js, the console operator/i18n_console.js); the few both show are here.

/** What the chat page and the console both show: the sign-in, and small forms' buttons. */
const STRINGS = {
  en: {
    close: "Close",
    copy: "Copy",
    copied: "Copied",
    save: "Save",
    cancel: "Cancel",
    apiKey: "API key",
    signIn: "Sign in",
    keyRejected: "That key was not accepted.",
    signOut: "Sign out",
  },
  zh: {
    close: "关闭",
    copy: "复制",
    copied: "已复制",
    save: "保存",
    cancel: "取消",
    apiKey: "API 密钥",
    signIn: "登录",
    keyRejected: "密钥无效。",
    signOut: "退出登录",
  },
};

const LANG_KEY = "tally.lang";
const listeners = new Set();

function initialLanguage() {
  const saved = localStorage.getItem(LANG_KEY);
  if (saved && saved in STRINGS) return saved;
  const preferred = navigator.languages?.[0] || navigator.language || "en";
  return preferred.toLowerCase().startsWith("zh") ? "zh" : "en";
}

let lang = initialLanguage();

/** Add a surface's strings (`{en: {...}, zh: {...}}`); its entry module does so first. */
export function addStrings(strings) {
  for (const [lang, texts] of Object.entries(strings)) Object.assign(STRINGS[lang], texts);
}

export function language() {
  return lang;
}

export function locale() {
  return lang === "zh" ? "zh-CN" : "en";
}

export function t(key, vars = {}) {
  const text = STRINGS[lang][key] ?? STRINGS.en[key] ?? key;
  return text.replace(/\{(\w+)\}/g, (_, name) => String(vars[name] ?? ""));
}

/** Label every marked element under `root` in the current language. */
export function applyI18n(root = document) {
  document.documentElement.lang = locale();
  for (const el of root.querySelectorAll("[data-i18n]")) {
    const vars = el.dataset.i18nVars ? JSON.parse(el.dataset.i18nVars) : {};
    el.textContent = t(el.dataset.i18n, vars);
  }
  for (const el of root.querySelectorAll("[data-i18n-attr]")) {
    const vars = el.dataset.i18nAttrVars ? JSON.parse(el.dataset.i18nAttrVars) : {};
    for (const pair of el.dataset.i18nAttr.split(";")) {
      const [attr, key] = pair.split(":");
      el.setAttribute(attr, t(key, vars));
    }
  }
}

export function setLanguage(next) {
  lang = next in STRINGS ? next : "en";
  localStorage.setItem(LANG_KEY, lang);
  applyI18n();
  for (const listener of listeners) listener(lang);
}

export function onLanguageChange(listener) {
  listeners.add(listener);
}

export function formatTime(iso) {
  const date = new Date(iso);
  return date.toLocaleTimeString(locale(), { hour: "2-digit", minute: "2-digit" });
}

export function formatDateTime(iso) {
  const date = new Date(iso);
  return date.toLocaleString(locale(), { dateStyle: "medium", timeStyle: "short" });
}

/** The sidebar group a timestamp falls in: today, yesterday, the past week, or older. */
export function dayGroup(iso, now = new Date()) {
  const startOfToday = new Date(now.getFullYear(), now.getMonth(), now.getDate()).getTime();
  const time = new Date(iso).getTime();
  const day = 24 * 60 * 60 * 1000;
  if (time >= startOfToday) return "today";
  if (time >= startOfToday - day) return "yesterday";
  if (time >= startOfToday - 7 * day) return "previous7";
  return "older";
}
