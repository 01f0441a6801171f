// The usage view (`#/usage?days=30`): per tenant and UTC day, the turns, tokens and estimated
// cost of the last days (GET /api/admin/usage). A line per tenant over the days (a day without
// usage is zero), today's tenants as bars, both showing the metric chosen; then a table of
// every tenant's day. The CSV of the same numbers is fetched with the key and saved.

import { h, setAttrs } from "../dom.js";
import { locale, t } from "../i18n.js";
import { admin } from "./admin_api.js";
import { download } from "./operations.js";
import { DAY_S, barChart, dayOf, dayTime, lineChart } from "./usage_chart.js";

const DEFAULT_DAYS = 30;
const MAX_DAYS = 366;
const TOP_TENANTS = 10;

/** What the charts can show; `of(row)`: a day's value, null when unknown (a model unpriced). */
const METRICS = {
  tokens: { label: "usageTokens", of: (row) => row.prompt_tokens + row.completion_tokens },
  turns: { label: "usageTurns", of: (row) => row.turns },
  cost: { label: "usageCost", of: (row) => row.estimated_cost ?? null },
};

/** The table's counted columns, after the day and the tenant: [label, field]. */
const COUNTS = [
  ["usageTurns", "turns"],
  ["usageTokensIn", "prompt_tokens"],
  ["usageTokensOut", "completion_tokens"],
  ["usageCached", "cached_tokens"],
  ["usageSummarizerCalls", "summarizer_calls"],
];

export async function render(root, console_, params) {
  const days = Math.min(Math.max(Number.parseInt(params.days, 10) || DEFAULT_DAYS, 1), MAX_DAYS);
  const usage = await admin.usage(days);
  const rows = usage.days;
  const currency = usage.currency ?? "USD";
  const format = formats(currency);
  const csv = csvLink(days, console_);
  const select = metricSelect();
  root.replaceChildren(
    h(
      "div",
      { class: "op-toolbar usage-toolbar" },
      h("div", { class: "usage-heading" }, h("h2", { t: "usageTitle" }), intro(days)),
      h("label", { class: "usage-metric" }, h("span", { t: "usageMetric" }), select),
      csv,
    ),
  );
  if (rows.length === 0) {
    root.append(h("p", { class: "op-card op-muted", t: ["usageNone", { n: days }] }));
    return;
  }
  const tenants = [...new Set(rows.map((row) => row.tenant_id))].sort();
  const lineHost = chartHost("usage-line-chart");
  const barHost = chartHost("usage-bar-chart");
  const noneToday = h("p", { class: "op-muted", t: "usageTodayNone", hidden: true });
  root.append(
    h(
      "div",
      { class: "usage-charts" },
      h(
        "section",
        { class: "op-card" },
        h("h3", { t: "usageDailyTitle" }),
        totals(rows, format),
        lineHost,
      ),
      h("section", { class: "op-card" }, h("h3", { t: "usageTodayTitle" }), barHost, noneToday),
    ),
    h("section", { class: "op-card" }, h("h3", { t: "usageTableTitle" }), table(rows, format)),
  );

  let charts = [];
  const draw = () => {
    for (const chart of charts) chart.destroy();
    const metric = METRICS[select.value];
    const vars = { metric: t(metric.label).toLowerCase() };
    setAttrs(lineHost, { "aria-label": "usageLineChart" }, vars);
    setAttrs(barHost, { "aria-label": "usageBarChart" }, vars);
    const write = select.value === "cost" ? format.cost : format.number;
    const tick = select.value === "cost" ? format.cost : format.compact;
    const dayList = dayRange(rows, days);
    const lines = tenants.map((tenant) => ({
      tenant,
      values: series(rows, tenant, dayList, metric),
    }));
    const bars = todaysTop(rows, tenants, metric);
    lineHost.dataset.metric = barHost.dataset.metric = select.value;
    charts = [lineChart(lineHost, { days: dayList, lines, format: write, tick })];
    barHost.hidden = bars.length === 0;
    noneToday.hidden = bars.length > 0;
    if (bars.length) charts.push(barChart(barHost, { bars, format: write, tick }));
  };
  select.addEventListener("change", draw);
  draw();
}

function intro(days) {
  return h("p", { class: "op-muted", t: ["usageIntro", { n: days }] });
}

function metricSelect() {
  const options = Object.entries(METRICS).map(([value, metric]) =>
    h("option", { value, t: metric.label }),
  );
  return h("select", { dataset: { testid: "usage-metric" } }, ...options);
}

/** A link to the CSV, which is fetched with the key (a plain link would send none). */
function csvLink(days, console_) {
  const path = admin.usageCsvPath(days);
  const link = h(
    "a",
    { class: "btn btn-small", href: path, download: "", dataset: { testid: "usage-csv" } },
    h("span", { t: "usageDownloadCsv" }),
  );
  link.addEventListener("click", async (event) => {
    event.preventDefault();
    if (link.getAttribute("aria-busy") === "true") return;
    link.setAttribute("aria-busy", "true");
    try {
      await download(path, `tally-usage-${dayOf(Date.now() / 1000)}.csv`);
    } catch (err) {
      console_.fail(err);
    } finally {
      link.removeAttribute("aria-busy");
    }
  });
  return link;
}

function chartHost(testid) {
  return h("div", { class: "usage-chart", role: "figure", dataset: { testid } });
}

function totals(rows, format) {
  const sum = (of) => rows.reduce((total, row) => total + of(row), 0);
  const vars = {
    turns: format.number(sum((row) => row.turns)),
    tokens: format.number(sum(METRICS.tokens.of)),
  };
  return h("p", {
    class: "op-muted",
    dataset: { testid: "usage-totals" },
    t: ["usageTotals", vars],
  });
}

/** The UTC days from `days` ago to today, oldest first, and any other day the rows name. */
function dayRange(rows, days) {
  const today = dayTime(dayOf(Date.now() / 1000));
  let first = today - (days - 1) * DAY_S;
  let last = today;
  for (const row of rows) {
    first = Math.min(first, dayTime(row.day));
    last = Math.max(last, dayTime(row.day));
  }
  const list = [];
  for (let seconds = first; seconds <= last; seconds += DAY_S) list.push(dayOf(seconds));
  return list;
}

/** A tenant's value of `metric` on each day of `dayList`: zero on a day without usage. */
function series(rows, tenant, dayList, metric) {
  const byDay = new Map(rows.filter((row) => row.tenant_id === tenant).map((r) => [r.day, r]));
  return dayList.map((day) => (byDay.has(day) ? metric.of(byDay.get(day)) : 0));
}

/** Today's (UTC) tenants with the most of `metric`, most first; index: the tenant's colour. */
function todaysTop(rows, tenants, metric) {
  const today = dayOf(Date.now() / 1000);
  return rows
    .filter((row) => row.day === today)
    .map((row) => ({
      tenant: row.tenant_id,
      value: metric.of(row),
      index: tenants.indexOf(row.tenant_id),
    }))
    .sort((a, b) => (b.value ?? -1) - (a.value ?? -1) || a.tenant.localeCompare(b.tenant))
    .slice(0, TOP_TENANTS);
}

function table(rows, format) {
  const head = h(
    "tr",
    {},
    h("th", { scope: "col", t: "usageDay" }),
    h("th", { scope: "col", t: "usageTenant" }),
    ...COUNTS.map(([label]) => h("th", { scope: "col", class: "op-number", t: label })),
    h("th", {
      scope: "col",
      class: "op-number",
      t: ["usageCostIn", { currency: format.currency }],
    }),
  );
  const body = rows.map((row) =>
    h(
      "tr",
      { dataset: { testid: "usage-row", tenant: row.tenant_id, day: row.day } },
      h("td", { dataset: { field: "day", value: row.day } }, row.day),
      h("td", { dataset: { field: "tenant_id", value: row.tenant_id } }, row.tenant_id),
      ...COUNTS.map(([, field]) => count(row, field, format)),
      costCell(row, format),
    ),
  );
  return h(
    "div",
    { class: "usage-table-wrap" },
    h(
      "table",
      { class: "op-table", dataset: { testid: "usage-table" } },
      h("thead", {}, head),
      h("tbody", {}, ...body),
    ),
  );
}

function count(row, field, format) {
  const value = row[field] ?? 0;
  return h("td", { class: "op-number", dataset: { field, value } }, format.number(value));
}

/** The day's estimated cost; a dash when none of it had a price, marked when some had none. */
function costCell(row, format) {
  const cost = row.estimated_cost ?? null;
  const data = { field: "estimated_cost", value: cost ?? "" };
  const cell = h("td", { class: "op-number", dataset: data });
  if (cost === null) {
    cell.textContent = "—";
    setAttrs(cell, { title: "usageNoPrice" });
  } else if (row.unpriced_calls) {
    cell.textContent = `${format.cost(cost)} *`;
    const unpriced = row.unpriced_calls === 1 ? "usageUnpricedOne" : "usageUnpriced";
    setAttrs(cell, { title: unpriced }, { n: row.unpriced_calls });
  } else {
    cell.textContent = format.cost(cost);
  }
  return cell;
}

/** Numbers in this page's language: counts, counts on an axis (12K), and amounts of `currency`. */
function formats(currency) {
  const number = new Intl.NumberFormat(locale());
  const compact = new Intl.NumberFormat(locale(), { notation: "compact" });
  let money = null;
  try {
    const options = { style: "currency", currency, maximumFractionDigits: 4 };
    money = new Intl.NumberFormat(locale(), options);
  } catch {
    money = null; // not an ISO 4217 code: write the amount and the code as given
  }
  return {
    currency,
    number: (value) => number.format(value),
    compact: (value) => compact.format(value),
    cost: (value) => (money ? money.format(value) : `${value.toFixed(4)} ${currency}`),
  };
}
