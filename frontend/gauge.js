// The context gauge in the chat header: how full the last request of this session was, from
// `turn.completed` (`context_tokens` of `context_budget`). It colours at the server's default
// compaction thresholds: 70 % (older messages are summarized) and 95 % (they are cut). Its
// tooltip also says how many of the prompt's tokens the vendor read from its prompt cache.

import { toast } from "./dom.js";
import { language, locale, t } from "./i18n.js";

export const NORMAL_RATIO = 0.7;
export const EMERGENCY_RATIO = 0.95;

/** "ok" below the normal threshold, "warn" from it, "danger" from the emergency one. */
export function contextLevel(ratio) {
  if (ratio >= EMERGENCY_RATIO) return "danger";
  if (ratio >= NORMAL_RATIO) return "warn";
  return "ok";
}

/**
 * The reading of a `turn.completed` event (or send response); null when it has none.
 * `cached` of the turn's `prompt` tokens were read from the prompt cache (0: none, or an
 * older server).
 */
export function contextReading(data) {
  const tokens = Number(data?.context_tokens);
  const budget = Number(data?.context_budget);
  if (!(tokens > 0 && budget > 0)) return null;
  const prompt = Number(data?.usage?.prompt_tokens) || 0;
  const cached = Number(data?.usage?.cached_tokens) || 0;
  return { tokens, budget, prompt, cached: prompt > 0 ? Math.min(cached, prompt) : 0 };
}

export class ContextGauge {
  /** `button`: the header's gauge, holding a ring (`.gauge-fill`) and a `.gauge-label`. */
  constructor(button) {
    this.el = button;
    this.fill = button.querySelector(".gauge-fill");
    this.label = button.querySelector(".gauge-label");
    this.reading = null;
    // No hover on a phone: a tap says the same as the tooltip.
    button.addEventListener("click", () => this.reading && toast({ raw: this.describe() }));
  }

  /** Show a reading (`{tokens, budget}`), or hide the gauge for null. */
  show(reading) {
    this.reading = reading;
    this.render();
  }

  render() {
    const reading = this.reading;
    this.el.hidden = !reading;
    if (!reading) return;
    const ratio = reading.tokens / reading.budget;
    const percent = Math.floor(ratio * 100); // floor: "95%" only once the 95 % line is crossed
    this.el.dataset.level = contextLevel(ratio);
    this.fill.setAttribute("stroke-dasharray", `${Math.min(Math.max(ratio * 100, 2), 100)} 100`);
    this.label.textContent = ratio > 0 && percent < 1 ? "<1%" : `${percent}%`;
    const description = this.describe();
    this.el.title = description;
    this.el.setAttribute("aria-label", description);
  }

  describe() {
    const { tokens, budget, prompt, cached } = this.reading;
    const number = new Intl.NumberFormat(locale());
    const context = t("contextGauge", {
      used: number.format(tokens),
      budget: number.format(budget),
      percent: Math.floor((tokens / budget) * 100),
      normal: Math.round(NORMAL_RATIO * 100),
      emergency: Math.round(EMERGENCY_RATIO * 100),
    });
    if (!(cached > 0)) return context;
    const cache = t("promptCached", {
      cached: number.format(cached),
      prompt: number.format(prompt),
    });
    return context + (language() === "zh" ? "" : " ") + cache; // Chinese sets no space
  }
}
