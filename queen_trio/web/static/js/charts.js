// Time-series charts (uPlot, vendored in vendor/uplot) and SVG sparklines.

import { h } from "./dom.js";
import { epoch, num } from "./format.js";

const PALETTE = ["--c1", "--c2", "--c3", "--c4", "--c5", "--c6"];

// uPlot loads with the first chart: pages without one never fetch or parse it.
let uplot = null;
function loadUplot() {
  uplot ??= new Promise((resolve, reject) => {
    const script = h("script", { src: "/dashboard/vendor/uplot/uPlot.iife.min.js" });
    script.addEventListener("load", () => resolve(window.uPlot));
    script.addEventListener("error", () => reject(new Error("uPlot did not load")));
    document.head.append(script);
  });
  return uplot;
}

// The colour a custom property of app.css stands for in the current theme. The properties are
// light-dark() pairs, which only a colour property resolves, so it is read through a probe's.
function cssVar(name) {
  const probe = h("i", { hidden: true });
  probe.style.setProperty("color", `var(${name})`); // CSSOM, which the CSP allows
  document.body.append(probe);
  const colour = getComputedStyle(probe).color;
  probe.remove();
  return colour;
}

// A chart of `series` over time: update() with the points' timestamps and one array per
// series. It follows its container's width and the theme.
export class TimeChart {
  constructor({ title, series, unit = "", height = 180 }) {
    this.series = series;
    this.unit = unit;
    this.height = height;
    this.plot = null;
    this.data = null;
    this.canvas = h("div", { class: "chart-canvas", role: "img", "aria-label": title });
    this.el = h("figure", { class: "chart" }, h("figcaption", {}, title), this.canvas);
    this.resize = new ResizeObserver(() => this.fit());
    this.resize.observe(this.canvas);
    this.themeChanged = () => this.rebuild();
    loadUplot(); // with the page, not after its data
    window.addEventListener("queen:theme", this.themeChanged);
  }

  // Resolves once the chart is drawn.
  update(points, values) {
    this.data = [points.map((p) => epoch(p.timestamp)), ...this.series.map((s, i) =>
      points.map((p, j) => (values ? values[i][j] : s.value(p))))];
    if (this.plot) {
      this.plot.setData(this.data);
      return Promise.resolve();
    }
    return this.rebuild();
  }

  options(width) {
    const axis = cssVar("--muted");
    const grid = cssVar("--grid");
    const unit = this.unit;
    return {
      width, height: this.height,
      legend: { live: true },
      cursor: { drag: { x: true, y: false } },
      scales: { x: { time: true }, y: { range: (u, min, max) => [Math.min(0, min), Math.max(1, max * 1.1)] } },
      axes: [
        { stroke: axis, grid: { stroke: grid, width: 1 }, ticks: { stroke: grid } },
        { stroke: axis, grid: { stroke: grid, width: 1 }, ticks: { stroke: grid }, size: 56,
          values: (u, splits) => splits.map((v) => `${num(v)}${unit}`) },
      ],
      series: [{ label: "time" }, ...this.series.map((s, i) => ({
        label: s.label, stroke: cssVar(PALETTE[i % PALETTE.length]), width: 2,
        value: (u, v) => (v === null || v === undefined ? "–" : `${num(v)}${unit}`),
        points: { show: false },
      }))],
    };
  }

  async rebuild() {
    if (!this.data) return;
    const UPlot = await loadUplot();
    if (this.destroyed) return;
    if (this.plot) this.plot.destroy();
    this.canvas.replaceChildren();
    this.plot = new UPlot(this.options(Math.max(200, this.canvas.clientWidth)), this.data, this.canvas);
  }

  fit() {
    if (this.plot && this.canvas.clientWidth && Math.abs(this.plot.width - this.canvas.clientWidth) > 2) {
      this.plot.setSize({ width: this.canvas.clientWidth, height: this.height });
    }
  }

  destroy() {
    this.destroyed = true;
    this.resize.disconnect();
    window.removeEventListener("queen:theme", this.themeChanged);
    if (this.plot) this.plot.destroy();
  }
}

// A small line of `values` (a metric's last hour), drawn in SVG.
export function sparkline(values, { width = 120, height = 28, label = "" } = {}) {
  const svg = h("svg:svg", { viewBox: `0 0 ${width} ${height}`, width, height, class: "spark",
                              role: "img", "aria-label": label });
  const finite = values.filter((v) => Number.isFinite(v));
  if (finite.length < 2) return svg;
  const max = Math.max(...finite);
  const min = Math.min(0, ...finite);
  const span = max - min || 1;
  const step = width / (values.length - 1);
  const points = values.map((v, i) =>
    `${(i * step).toFixed(1)},${(height - 2 - ((Number.isFinite(v) ? v : 0) - min) / span * (height - 4)).toFixed(1)}`);
  svg.append(h("svg:polyline", { points: points.join(" "), fill: "none" }));
  return svg;
}
