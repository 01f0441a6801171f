// The usage view's two uPlot charts: one line per tenant over the days, and today's tenants as
// bars. Colours come from the page's CSS variables (light-dark() pairs resolved by the
// browser), so a chart follows the theme and is drawn again when it changes; it keeps the
// width of its host as the window resizes. Each host carries its numbers in `data-chart` (JSON),
// which is what the chart draws.

import { h } from "../dom.js";
import { t } from "../i18n.js";
import uPlot from "../vendor/uplot/uPlot.esm.js";

const LINE_HEIGHT = 280;
const BAR_HEIGHT = 220;
const SERIES_COLORS = 8; // --chart-1 … --chart-8 in operator.css
export const DAY_S = 24 * 60 * 60;

/** Seconds since the epoch of a UTC day ("2025-03-14"). */
export function dayTime(day) {
  return Date.parse(`${day}T00:00:00Z`) / 1000;
}

/** The UTC day ("2025-03-14") of seconds since the epoch. */
export function dayOf(seconds) {
  return new Date(seconds * 1000).toISOString().slice(0, 10);
}

/** The tenant's colour in the theme's palette, by its position among the tenants. */
function seriesColor(colors, index) {
  return colors.series[index % colors.series.length];
}

/**
 * One line per tenant: `days` (UTC days, oldest first), `lines` ([{tenant, values}], a value
 * per day, null where unknown); `format(value)` writes a value, `tick(value)` one on the axis.
 */
export function lineChart(host, { days, lines, format, tick = format }) {
  host.dataset.chart = JSON.stringify({ days, lines });
  const data = [days.map(dayTime), ...lines.map((line) => line.values)];
  return mountChart(host, data, (colors) => ({
    height: LINE_HEIGHT,
    // Days are UTC days: label them so, whatever this browser's time zone.
    tzDate: (seconds) => uPlot.tzDate(new Date(seconds * 1000), "Etc/UTC"),
    scales: { x: { time: true }, y: { range: fromZero } },
    series: [
      { label: t("usageDay"), value: (u, seconds) => (seconds == null ? "" : dayOf(seconds)) },
      ...lines.map((line, index) => ({
        label: line.tenant,
        stroke: seriesColor(colors, index),
        width: 2,
        points: { size: 5 },
        value: (u, value) => (value == null ? "—" : format(value)),
      })),
    ],
    axes: [
      { ...axis(colors), space: 60, values: (u, splits) => splits.map((s) => dayOf(s).slice(5)) },
      { ...axis(colors), size: 72, values: (u, splits) => splits.map(tick) },
    ],
  }));
}

/** Bars, one per tenant (`bars`: [{tenant, value, index}], index: its colour). */
export function barChart(host, { bars, format, tick = format }) {
  host.dataset.chart = JSON.stringify({ bars });
  const data = [bars.map((_, i) => i), bars.map((bar) => bar.value)];
  const names = bars.map((bar) => bar.tenant);
  // The bars' numbers as a list below them, which a screen reader reads too (a canvas is mute).
  host.querySelector(".usage-bar-values")?.remove();
  const items = bars.map((bar) =>
    h(
      "li",
      {},
      h("span", { class: `usage-swatch usage-swatch-${(bar.index % SERIES_COLORS) + 1}` }),
      h("span", { class: "usage-bar-tenant" }, bar.tenant),
      h("span", { class: "usage-bar-value" }, bar.value == null ? "—" : format(bar.value)),
    ),
  );
  host.append(h("ol", { class: "usage-bar-values" }, ...items));
  return mountChart(host, data, (colors) => ({
    height: BAR_HEIGHT,
    legend: { show: false },
    cursor: { points: { show: false } },
    scales: { x: { time: false, range: [-0.5, bars.length - 0.5] }, y: { range: fromZero } },
    series: [
      {},
      {
        label: "",
        width: 0,
        paths: uPlot.paths.bars({
          size: [0.6, 72],
          disp: {
            fill: { unit: 3, values: () => bars.map((bar) => seriesColor(colors, bar.index)) },
          },
        }),
        points: { show: false },
        value: (u, value) => (value == null ? "—" : format(value)),
      },
    ],
    axes: [
      {
        ...axis(colors),
        grid: { show: false },
        splits: () => names.map((_, i) => i),
        values: (u, splits) => splits.map((i) => names[i] ?? ""),
      },
      { ...axis(colors), size: 72, values: (u, splits) => splits.map(tick) },
    ],
  }));
}

/**
 * Draw `data` with the options `build(colors)` gives, at the host's width; again whenever the
 * theme changes. Answers {destroy}; a chart whose host left the page stops at its next event.
 */
function mountChart(host, data, build) {
  let plot = null;
  let width = 0;
  const draw = () => {
    plot?.destroy();
    width = widthOf(host);
    plot = new uPlot({ ...build(themeColors(host)), width }, data, host);
    host.prepend(plot.root); // before what the host holds besides, as the bars' list
  };
  const redraw = () => (host.isConnected ? draw() : destroy());
  const resized = new ResizeObserver(() => {
    if (!host.isConnected) return destroy();
    const next = widthOf(host);
    if (next !== width) {
      width = next;
      plot.setSize({ width, height: plot.height });
    }
  });
  const dark = matchMedia("(prefers-color-scheme: dark)");
  const themed = new MutationObserver(redraw); // the page's own theme choice: html[data-theme]
  function destroy() {
    resized.disconnect();
    themed.disconnect();
    dark.removeEventListener("change", redraw);
    plot?.destroy();
    plot = null;
  }
  draw();
  resized.observe(host);
  themed.observe(document.documentElement, { attributes: true, attributeFilter: ["data-theme"] });
  dark.addEventListener("change", redraw);
  return { destroy };
}

function widthOf(host) {
  return Math.max(240, Math.floor(host.getBoundingClientRect().width));
}

/** The theme's colours as drawn now: each variable resolved through a hidden probe. */
function themeColors(host) {
  const probe = document.createElement("span");
  probe.hidden = true;
  host.append(probe);
  const read = (name) => {
    probe.style.color = `var(${name})`;
    return getComputedStyle(probe).color;
  };
  const colors = {
    text: read("--text-2"),
    grid: read("--border"),
    tick: read("--border-strong"),
    series: Array.from({ length: SERIES_COLORS }, (_, i) => read(`--chart-${i + 1}`)),
  };
  probe.remove();
  return colors;
}

function axis(colors) {
  return {
    stroke: colors.text,
    grid: { stroke: colors.grid, width: 1 },
    ticks: { stroke: colors.tick, width: 1 },
  };
}

/** The y range: from zero to a little above the highest value (1 when all are zero). */
function fromZero(u, min, max) {
  return [0, max > 0 ? max * 1.1 : 1];
}
