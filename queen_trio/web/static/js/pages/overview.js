// Overview: totals, throughput/lag/dead-letter curves over the header's range, a table of
// metrics with their sparklines, the queues with most pending and the groups most behind.

import { get } from "../api.js";
import { sparkline, TimeChart } from "../charts.js";
import { h, link } from "../dom.js";
import { duration, groupLabel, ms, num, pct, plural, rate } from "../format.js";
import { rangeQuery, session } from "../session.js";
import { badge, card, code, emptyState, FIGURES_NOTE, figureTiles, PUSH_EXAMPLE, Region, Table, tiles } from "../ui.js";

const METRICS = [
  ["Ingested", (p) => p.ingestedPerSecond, rate],
  ["Processed", (p) => p.processedPerSecond, rate],
  ["Popped", (p) => p.popPerSecond, rate],
  ["Consumer lag (max)", (p) => p.maxLagMs / 1000, duration],
  ["Dead-lettered", (p) => p.dlqCount, num],
  ["Ack failures", (p) => p.ackFailed, num],
  ["Database errors", (p) => p.dbErrors, num],
  ["Event loop lag (max)", (p) => p.maxEventLoopLagMs, ms],
  ["CPU (user)", (p) => p.queenCpuUserPct, pct],
  ["Memory (RSS, MB)", (p) => p.queenRssMb, num],
  ["Pool connections in use", (p) => p.dbPoolActive, num],
  ["Pool free slots (min)", (p) => p.minFreeSlots, num],
];

export default function overview({ main }) {
  const totals = new Region({ id: "overview-totals" });
  const throughput = new TimeChart({ title: "Throughput (messages/s)", series: [
    { label: "ingested", value: (p) => p.ingestedPerSecond },
    { label: "processed", value: (p) => p.processedPerSecond }] });
  const lag = new TimeChart({ title: "Consumer lag (s)", unit: " s", series: [
    { label: "average", value: (p) => p.avgLagMs / 1000 },
    { label: "max", value: (p) => p.maxLagMs / 1000 }] });
  const dlq = new TimeChart({ title: "Dead letters per bucket", series: [
    { label: "dead-lettered", value: (p) => p.dlqCount },
    { label: "ack failures", value: (p) => p.ackFailed }] });
  const charts = new Region();
  charts.show(h("div", { class: "charts" }, throughput.el, lag.el, dlq.el));
  const metrics = new Table({
    label: "Metrics over the range",
    key: (m) => m.name,
    columns: [
      { key: "name", label: "Metric", header: true, render: (m) => m.name },
      { key: "now", label: "Latest", num: true, render: (m) => m.format(m.latest) },
      { key: "peak", label: "Peak", num: true, render: (m) => m.format(m.peak) },
      { key: "spark", label: "Range", render: (m) => sparkline(m.values, { width: 240, label: `${m.name} over the range` }) },
    ],
  });
  const metricsRegion = new Region();
  metricsRegion.show(metrics.el);
  const topQueues = new Table({
    label: "Queues with the most pending",
    key: (q) => q.name,
    empty: "No queue has anything pending.",
    columns: [
      { key: "name", label: "Queue", header: true, render: (q) => link(["queues", q.name], q.name) },
      { key: "pending", label: "Pending", num: true, render: (q) => num(q.messages.pending) },
      { key: "processing", label: "Processing", num: true, render: (q) => num(q.messages.processing) },
      { key: "dlq", label: "Dead letters", num: true, render: (q) => num(q.messages.deadLetter) },
    ],
  });
  const topGroups = new Table({
    label: "Consumer groups by lag",
    key: (g) => JSON.stringify([g.name, g.queueName]),
    empty: "No consumer group is behind.",
    columns: [
      { key: "name", label: "Group / queue", header: true, render: (g) => [link(["groups", g.name], groupLabel(g.name)),
        h("div", { class: "sub" }, link(["queues", g.queueName], g.queueName))] },
      { key: "state", label: "State", render: (g) => badge(g.state) },
      { key: "lag", label: "Left", num: true, render: (g) => num(g.totalLag) },
      { key: "time", label: "Time lag", num: true, render: (g) => duration(g.maxTimeLag) },
    ],
  });
  const queuesRegion = new Region();
  queuesRegion.show(topQueues.el);
  const groupsRegion = new Region();
  groupsRegion.show(topGroups.el);

  const rangeLabel = h("span", {});
  main.append(
    h("h1", {}, "Overview"),
    totals.el,
    card("Traffic", { id: "traffic", subtitle: rangeLabel }, charts.el),
    h("div", { class: "columns" },
      card("Queues with the most pending", { id: "top-queues" }, queuesRegion.el),
      card("Consumer groups by lag", { id: "top-groups" }, groupsRegion.el)),
    card("Metrics", { id: "metrics", subtitle: "latest bucket, peak and curve over the range" }, metricsRegion.el),
  );

  async function loadTotals() {
    try {
      const o = await get("/api/v1/resources/overview");
      const m = o.messages;
      totals.show(o.queues === 0
        ? emptyState("No queues yet: push a message with the Push button above, or with curl:", code(PUSH_EXAMPLE))
        : null,
      tiles([
        { key: "queues", label: "Queues", value: num(o.queues), hint: `${plural(o.namespaces, "namespace")} · ${plural(o.tasks, "task")}` },
        { key: "partitions", label: "Partitions", value: num(o.partitions) },
        ...figureTiles(m),
        { key: "lag", label: "Max lag", value: duration(o.lag.time.max), hint: `at most ${plural(o.lag.offset.max, "message")} behind` },
        { key: "in", label: "Ingested", value: rate(o.throughput.ingestedPerSecond), hint: "5-minute average" },
        { key: "out", label: "Processed", value: rate(o.throughput.processedPerSecond), hint: "5-minute average" },
      ]), h("p", { class: "muted figures-note" }, FIGURES_NOTE));
    } catch (error) {
      totals.fail(error, "Could not load the totals");
    }
  }

  async function loadSeries() {
    try {
      rangeLabel.textContent = `over the last ${session.settings.range}`;
      const s = await get("/api/v1/status", rangeQuery());
      const points = s.throughput;
      await Promise.all([throughput.update(points), lag.update(points), dlq.update(points)]);
      metrics.update(METRICS.map(([name, value, format]) => {
        const values = points.map(value);
        return { name, format, values, latest: values[values.length - 1], peak: Math.max(...values) };
      }));
      charts.show(h("div", { class: "charts" }, throughput.el, lag.el, dlq.el),
        s.statsAge < 0 ? h("p", { class: "muted" }, "No sample yet: the broker samples every 10 s.") : null);
      metricsRegion.show(metrics.el);
    } catch (error) {
      charts.fail(error, "Could not load the curves");
      metricsRegion.fail(error, "Could not load the metrics");
    }
  }

  async function loadQueues() {
    try {
      const { queues } = await get("/api/v1/resources/queues", { limit: 1000 });
      topQueues.update(queues.filter((q) => q.messages.pending > 0)
        .sort((a, b) => b.messages.pending - a.messages.pending).slice(0, 10));
      queuesRegion.show(topQueues.el);
    } catch (error) {
      queuesRegion.fail(error, "Could not load the queues");
    }
  }

  async function loadGroups() {
    try {
      const groups = await get("/api/v1/consumer-groups");
      topGroups.update(groups.filter((g) => g.totalLag > 0)
        .sort((a, b) => b.maxTimeLag - a.maxTimeLag || b.totalLag - a.totalLag).slice(0, 10));
      groupsRegion.show(topGroups.el);
    } catch (error) {
      groupsRegion.fail(error, "Could not load the consumer groups");
    }
  }

  return {
    title: "Overview",
    refresh: () => Promise.all([loadTotals(), loadSeries(), loadQueues(), loadGroups()]),
    destroy: () => [throughput, lag, dlq].forEach((c) => c.destroy()),
  };
}
