// Analytics: throughput, lag, backlog and retention series for the whole broker, a queue, a
// namespace or a task, over a chosen range and bucket width.

import { get } from "../api.js";
import { TimeChart } from "../charts.js";
import { h, link } from "../dom.js";
import { duration, num } from "../format.js";
import { session } from "../session.js";
import { card, emptyState, Region, Table } from "../ui.js";

const RANGES = { "1h": 3600, "6h": 6 * 3600, "24h": 86400, "7d": 7 * 86400 };
const BUCKETS = [["", "automatic"], ["1", "1 minute"], ["5", "5 minutes"], ["15", "15 minutes"],
                 ["60", "1 hour"], ["360", "6 hours"], ["1440", "1 day"]];

// What each kind of maintenance work is, in words (GET /api/v1/analytics/retention's kinds).
const MAINTENANCE_KINDS = {
  expired: "messages removed: retentionSeconds",
  completed: "messages removed: completedRetentionSeconds",
  evicted: "moved to dead letters: maxWaitTimeSeconds",
  pruned: "old samples and index rows pruned",
  reclaimed: "empty partitions removed",
  snapshots: "queue snapshots taken (nothing removed)",
};

export default function analytics({ main, query }) {
  const state = {
    scope: query.scope || "all", name: query.name || "",
    range: query.range || session.settings.range, bucketMinutes: query.bucketMinutes || "",
  };
  const scope = h("select", { "aria-label": "Scope" }, [["all", "whole broker"], ["queue", "queue"], ["namespace", "namespace"], ["task", "task"]]
    .map(([v, t]) => h("option", { value: v }, t)));
  const name = h("input", { value: state.name, spellcheck: "false", list: "analytics-names", "aria-label": "Queue, namespace or task name", dataset: { key: "a-name" } });
  const names = h("datalist", { id: "analytics-names" });
  const range = h("select", { "aria-label": "Range" }, Object.keys(RANGES).map((r) => h("option", { value: r }, r)));
  const bucket = h("select", { "aria-label": "Interval" }, BUCKETS.map(([v, t]) => h("option", { value: v }, t)));
  scope.value = state.scope;
  range.value = state.range;
  bucket.value = state.bucketMinutes;
  const note = new Region();
  const throughput = new TimeChart({ title: "Throughput (messages/s)", series: [
    { label: "ingested", value: (p) => p.ingestedPerSecond }, { label: "processed", value: (p) => p.processedPerSecond },
    { label: "popped", value: (p) => p.popPerSecond }] });
  const lag = new TimeChart({ title: "Consumer lag (s)", unit: " s", series: [
    { label: "average", value: (p) => p.avgLagMs / 1000 }, { label: "max", value: (p) => p.maxLagMs / 1000 }] });
  const failures = new TimeChart({ title: "Failures per bucket", series: [
    { label: "dead-lettered", value: (p) => p.dlqCount }, { label: "ack failures", value: (p) => p.ackFailed },
    { label: "database errors", value: (p) => p.dbErrors }] });
  const backlog = new TimeChart({ title: "Backlog (messages)", series: [
    { label: "pending", value: () => 0 }, { label: "processing", value: () => 0 }, { label: "dead letters", value: () => 0 }] });
  let retention = null;
  const retentionHost = h("div");
  const breakdownRegion = new Region();
  const breakdown = new Table({
    label: "Per queue over the range",
    key: (r) => r.queue,
    sort: "pushed",
    columns: [
      { key: "queue", label: "Queue", header: true, value: (r) => r.queue, render: (r) => link(["queues", r.queue], r.queue) },
      { key: "pushed", label: "Pushed", num: true, value: (r) => r.pushed, render: (r) => num(r.pushed) },
      { key: "popped", label: "Popped", num: true, value: (r) => r.popped, render: (r) => num(r.popped) },
      { key: "acked", label: "Acked", num: true, value: (r) => r.acked, render: (r) => num(r.acked) },
      { key: "nacked", label: "Nacked", num: true, value: (r) => r.nacked, render: (r) => num(r.nacked) },
      { key: "dlq", label: "Dead-lettered", num: true, value: (r) => r.deadLettered, render: (r) => num(r.deadLettered) },
      { key: "pending", label: "Pending now", num: true, value: (r) => r.pending, render: (r) => num(r.pending) },
      { key: "lag", label: "Max lag", num: true, value: (r) => r.maxLag, render: (r) => duration(r.maxLag) },
    ],
  });

  const apply = () => {
    Object.assign(state, { scope: scope.value, name: name.value.trim(), range: range.value, bucketMinutes: bucket.value });
    name.disabled = state.scope === "all";
    const params = new URLSearchParams(Object.entries(state).filter(([k, v]) => v && !(k === "scope" && v === "all")));
    history.replaceState(null, "", `#/analytics${params.toString() ? `?${params}` : ""}`);
    load();
  };
  name.disabled = state.scope === "all";
  scope.addEventListener("change", apply);
  range.addEventListener("change", apply);
  bucket.addEventListener("change", apply);
  main.append(h("h1", {}, "Analytics"),
    h("form", { class: "filters", onsubmit: (e) => { e.preventDefault(); apply(); } },
      h("label", {}, "Scope", scope), h("label", {}, "Name", name, names), h("label", {}, "Range", range),
      h("label", {}, "Interval", bucket), h("button", { type: "submit", class: "primary" }, "Show")),
    note.el,
    h("div", { class: "charts" }, throughput.el, lag.el, failures.el, backlog.el),
    card("Maintenance", { id: "retention", subtitle: "what the periodic passes did, every queue: messages removed by retention, moved to dead letters, old rows pruned; and the queue snapshots taken every minute, which remove nothing" }, retentionHost),
    card("Per queue", { id: "breakdown" }, breakdownRegion.el));

  const filter = () => (state.scope === "all" || !state.name ? {} : { [state.scope]: state.name });
  const span = () => {
    const to = new Date();
    return { from: new Date(to.getTime() - RANGES[state.range] * 1000).toISOString(), to: to.toISOString(),
             bucketMinutes: state.bucketMinutes };
  };

  let namesLoaded = false;
  async function loadNames() {
    if (namesLoaded) return;
    namesLoaded = true;
    const [qs, ns, ts] = await Promise.all([get("/api/v1/resources/queues", { limit: 1000 }),
      get("/api/v1/resources/namespaces"), get("/api/v1/resources/tasks")]);
    names.replaceChildren(...qs.queues.map((q) => h("option", { value: q.name })),
      ...ns.namespaces.map((n) => h("option", { value: n.namespace })), ...ts.tasks.map((t) => h("option", { value: t.task })));
  }

  async function load() {
    const q = { ...span(), ...filter() };
    try {
      const scoped = state.scope !== "all" && state.name;
      const [status, kept, lags, ops] = await Promise.all([
        get("/api/v1/status", q), get("/api/v1/analytics/retention", span()),
        scoped ? get("/api/v1/analytics/queue-lag", q) : null, scoped ? get("/api/v1/analytics/queue-ops", q) : null]);
      note.show(h("p", { class: "muted" }, `${status.pointCount} buckets of ${status.bucketMinutes} min, ${status.timeRange.from} to ${status.timeRange.to}.`),
        state.scope !== "all" && !state.name ? emptyState(`Name a ${state.scope} to narrow the series.`) : null);
      throughput.update(status.throughput);
      lag.update(status.throughput);
      failures.update(status.throughput);
      if (scoped) {
        const points = status.throughput;
        const sum = (key) => points.map((p, i) => lags.queues.reduce((t, queue) => t + (queue.points[i] ? queue.points[i][key] : 0), 0));
        backlog.update(points, [sum("pending"), sum("processing"), sum("deadLetters")]);
        const lagBy = new Map(lags.queues.map((queue) => [queue.queue, queue]));
        breakdown.empty = "No queue in this scope has samples in the range.";
        breakdown.update(ops.queues.map((queue) => {
          const total = (key) => queue.points.reduce((t, p) => t + p[key], 0);
          const l = lagBy.get(queue.queue);
          const lastLag = l && l.points.length ? l.points[l.points.length - 1] : null;
          return { queue: queue.queue, pushed: total("pushed"), popped: total("popped"), acked: total("acked"),
                   nacked: total("nacked"), deadLettered: total("deadLettered"), pending: lastLag ? lastLag.pending : null,
                   maxLag: l ? Math.max(0, ...l.points.map((p) => p.maxLagSeconds)) : null };
        }));
        breakdownRegion.show(breakdown.el);
      } else {
        backlog.update(status.throughput, [status.throughput.map(() => null), status.throughput.map(() => null), status.throughput.map(() => null)]);
        breakdownRegion.show(emptyState("Pick a queue, namespace or task above for the backlog curve and the per-queue figures."));
      }
      if (!retention || retention.kinds !== kept.kinds.join()) {
        if (retention) retention.chart.destroy();
        const kinds = kept.kinds.length ? kept.kinds : ["expired", "completed"];
        retention = { kinds: kept.kinds.join(), chart: new TimeChart({ title: "Maintenance work per bucket", series: kinds.map((k) => ({ label: MAINTENANCE_KINDS[k] || k, value: (p) => p[k] || 0 })) }) };
        retentionHost.replaceChildren(retention.chart.el);
      }
      retention.chart.update(kept.points);
    } catch (error) {
      note.fail(error, "Could not load the series");
    }
  }

  return {
    title: "Analytics",
    refresh: () => Promise.all([load(), loadNames().catch(() => {})]),
    destroy: () => [throughput, lag, failures, backlog, retention && retention.chart].forEach((c) => c && c.destroy()),
  };
}
