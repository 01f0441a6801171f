// The light/dark theme: the system's unless the user chose one, kept in localStorage and shown
// as html[data-theme], which the stylesheets (and the console's charts) follow.

import { icon } from "./dom.js";

const THEME_KEY = "tally.theme";

function isDark() {
  const chosen = document.documentElement.dataset.theme;
  return chosen ? chosen === "dark" : matchMedia("(prefers-color-scheme: dark)").matches;
}

/** Applies the user's stored choice and wires `toggle` (a button) to switch it. */
export function startThemeToggle(toggle) {
  const showIcon = () => toggle.replaceChildren(icon(isDark() ? "sun" : "moon"));
  const chosen = localStorage.getItem(THEME_KEY);
  if (chosen) document.documentElement.dataset.theme = chosen;
  showIcon();
  matchMedia("(prefers-color-scheme: dark)").addEventListener("change", showIcon);
  toggle.addEventListener("click", () => {
    const next = isDark() ? "light" : "dark";
    document.documentElement.dataset.theme = next;
    localStorage.setItem(THEME_KEY, next);
    showIcon();
  });
}
