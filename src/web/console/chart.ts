// Spend and margin per UTC day as an inline SVG bar chart, built with DOM calls (no library,
// no markup strings). Days without calls show as gaps, so the x axis is true time.
import type { AuditView } from "../../core/desk/wire.ts";
import { h, s } from "./dom.ts";
import { hint, mc } from "../../core/money/millicents.ts";

export type Day = { day: string; spend: number; margin: number; cost: number; calls: number };

const DAY_MS = 86_400_000;
/** The chart shows at most this many days (the latest ones). */
export const CHART_DAYS = 60;

/** Charged calls summed per UTC day, every day from the first to the last present. */
export function perDay(rows: readonly AuditView[]): Day[] {
  const byDay = new Map<string, Day>();
  for (const r of rows) {
    if (r.outcome !== "charged") continue;
    const day = r.at.slice(0, 10);
    const d = byDay.get(day) ?? { day, spend: 0, margin: 0, cost: 0, calls: 0 };
    d.spend += r.price_mc;
    d.margin += r.margin_mc;
    d.cost += r.upstream_cost_mc;
    d.calls += 1;
    byDay.set(day, d);
  }
  if (byDay.size === 0) return [];
  const days = [...byDay.keys()].sort();
  const out: Day[] = [];
  const last = Date.parse(`${days[days.length - 1]}T00:00:00Z`);
  const first = Math.max(Date.parse(`${days[0]}T00:00:00Z`), last - (CHART_DAYS - 1) * DAY_MS);
  for (let t = first; t <= last; t += DAY_MS) {
    const day = new Date(t).toISOString().slice(0, 10);
    out.push(byDay.get(day) ?? { day, spend: 0, margin: 0, cost: 0, calls: 0 });
  }
  return out;
}

/** A round step for the y axis (1, 2 or 5 times a power of ten). */
function niceStep(range: number, ticks: number): number {
  const raw = Math.max(1, range / ticks);
  const pow = 10 ** Math.floor(Math.log10(raw));
  for (const m of [1, 2, 5, 10]) if (m * pow >= raw) return m * pow;
  return 10 * pow;
}

const compact = new Intl.NumberFormat("en-US", { notation: "compact", maximumFractionDigits: 1 });

export function spendChart(days: Day[]): HTMLElement {
  if (days.length === 0) return h("p", { class: "muted chart-empty" }, "No charged call in this selection yet.");
  const W = 760;
  const H = 240;
  const left = 64;
  const right = 12;
  const top = 12;
  const bottom = 40;
  const plotW = W - left - right;
  const plotH = H - top - bottom;
  const maxV = Math.max(1, ...days.map((d) => Math.max(d.spend, d.margin)));
  const minV = Math.min(0, ...days.map((d) => d.margin));
  const step = niceStep(maxV - minV, 4);
  const yMax = Math.ceil(maxV / step) * step;
  const yMin = Math.floor(minV / step) * step;
  const y = (v: number) => top + plotH - ((v - yMin) / (yMax - yMin)) * plotH;

  const svg = s("svg", { viewBox: `0 0 ${W} ${H}`, class: "chart", role: "img", "aria-label": "Spend and margin per day (mc)" });
  svg.append(s("title", {}, "Spend and margin per UTC day, in millicents"));
  for (let v = yMin; v <= yMax; v += step) {
    svg.append(s("line", { x1: left, x2: W - right, y1: y(v), y2: y(v), class: v === 0 ? "axis" : "grid" }));
    svg.append(s("text", { x: left - 6, y: y(v) + 4, class: "tick", "text-anchor": "end" }, `${compact.format(v)}`));
  }
  svg.append(s("text", { x: 4, y: top + 4, class: "tick unit" }, "mc"));
  const slot = plotW / days.length;
  const barW = Math.max(2, Math.min(28, (slot - 4) / 2));
  const labelEvery = Math.ceil(days.length / 12);
  days.forEach((d, i) => {
    const x0 = left + i * slot + (slot - 2 * barW) / 2;
    const bar = (v: number, x: number, cls: string, label: string) => {
      const r = s("rect", { x, y: Math.min(y(v), y(0)), width: barW, height: Math.max(v === 0 ? 0 : 1, Math.abs(y(v) - y(0))), class: cls });
      r.append(s("title", {}, `${d.day} ${label}: ${mc(v)} (${hint(v)})`));
      return r;
    };
    const g = s("g", { class: "day", "data-day": d.day });
    g.append(bar(d.spend, x0, "spend", "spend"), bar(d.margin, x0 + barW, "margin", "margin"));
    svg.append(g);
    if (i % labelEvery === 0 || i === days.length - 1) {
      svg.append(s("text", { x: left + i * slot + slot / 2, y: H - bottom + 16, class: "tick", "text-anchor": "middle" }, d.day.slice(5)));
    }
  });
  const legend = h(
    "div",
    { class: "legend" },
    h("span", { class: "swatch spend" }),
    "Spend (price of charged calls)",
    h("span", { class: "swatch margin" }),
    "Margin (price − upstream cost)",
  );
  return h("figure", { class: "chart-box" }, svg, legend);
}
