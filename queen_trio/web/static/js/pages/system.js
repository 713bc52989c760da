// System: the broker processes, this process's pool, lane, fusion, long polls, maintenance
// and spool, their curves, and PostgreSQL's figures.

import { get, post } from "../api.js";
import { TimeChart } from "../charts.js";
import { h } from "../dom.js";
import { ago, bytes, duration, ms, num, pct, rate } from "../format.js";
import { live } from "../live.js";
import { can, rangeQuery } from "../session.js";
import { actionButton, card, confirmAction, definitions, encryptionOff, Region, Table, tiles, toast } from "../ui.js";

export default function system({ main }) {
  const processRegion = new Region();
  const workersRegion = new Region();
  const internalsRegion = new Region();
  const maintenanceRegion = new Region();
  const spoolRegion = new Region();
  const pgRegion = new Region();
  const chartsRegion = new Region();
  const charts = {};
  const workers = new Table({
    label: "Broker processes",
    key: (w) => w.workerId,
    empty: "No broker process has sampled in the range yet (every 10 s).",
    columns: [
      { key: "id", label: "Worker", header: true, render: (w) => w.workerId },
      { key: "host", label: "Host", render: (w) => w.hostname },
      { key: "pid", label: "PID", num: true, render: (w) => String(w.pid) },
      { key: "seen", label: "Last sample", render: (w) => ago(w.lastSampleAt) },
      { key: "loop", label: "Loop lag avg / max", num: true, render: (w) => `${ms(w.avgEventLoopLagMs)} / ${ms(w.maxEventLoopLagMs)}` },
      { key: "free", label: "Free pool slots", num: true, render: (w) => num(w.freeSlots) },
      { key: "db", label: "DB connections", num: true, render: (w) => num(w.dbConnections) },
      { key: "queued", label: "Queued work", num: true, render: (w) => num(w.jobQueueSize) },
      { key: "processed", label: "Messages", num: true, render: (w) => num(w.messagesProcessed) },
    ],
  });
  const maintenance = new Table({
    label: "Maintenance",
    key: (m) => m.name,
    columns: [
      { key: "name", label: "Task", header: true, render: (m) => m.name },
      { key: "passes", label: "Passes", num: true, render: (m) => num(m.passes) },
      { key: "skipped", label: "Skipped (another broker ran it)", num: true, render: (m) => num(m.skipped) },
      { key: "failures", label: "Failures", num: true, render: (m) => num(m.failures) },
      { key: "totals", label: "Totals", render: (m) => Object.entries(m.totals).map(([k, v]) => `${k} ${num(v)}`).join(" · ") },
      { key: "error", label: "Last error", render: (m) => (m.lastError ? h("span", { class: "error-text" }, m.lastError) : "–") },
    ],
  });
  const tables = new Table({
    label: "PostgreSQL tables",
    key: (t) => t.name,
    sort: "size",
    columns: [
      { key: "name", label: "Table", header: true, value: (t) => t.name, render: (t) => t.name },
      { key: "rows", label: "Rows", num: true, value: (t) => t.rows, render: (t) => num(t.rows) },
      { key: "dead", label: "Dead rows", num: true, value: (t) => t.deadRows, render: (t) => num(t.deadRows) },
      { key: "size", label: "Size", num: true, value: (t) => t.totalBytes, render: (t) => bytes(t.totalBytes) },
      { key: "index", label: "Indexes", num: true, value: (t) => t.indexBytes, render: (t) => bytes(t.indexBytes) },
      { key: "seq", label: "Seq scans", num: true, value: (t) => t.seqScans, render: (t) => num(t.seqScans) },
      { key: "idx", label: "Index scans", num: true, value: (t) => t.indexScans, render: (t) => num(t.indexScans) },
      { key: "vacuum", label: "Autovacuum", value: (t) => t.lastAutovacuum || "", render: (t) => ago(t.lastAutovacuum) },
    ],
  });
  const chartsEl = h("div", { class: "charts" });
  chartsRegion.show(chartsEl);

  const actions = h("div", { class: "actions" }, can("admin") ? actionButton("Sample now", async () => {
    try {
      await post("/api/v1/stats/refresh");
      toast("Sampled: every figure is exact now");
      live.refreshNow();
    } catch (error) {
      toast(`Sampling failed: ${error.message}`, "error");
    }
  }) : null);
  main.append(h("div", { class: "page-head" }, h("h1", {}, "System"), actions),
    processRegion.el,
    card("Broker processes", { id: "workers" }, workersRegion.el),
    card("Curves per process", { id: "curves" }, chartsRegion.el),
    h("div", { class: "columns" },
      card("Lane, fusion and long polls", { id: "internals", subtitle: "the process that answered" }, internalsRegion.el),
      card("Spool", { id: "spool" }, spoolRegion.el)),
    card("Maintenance", { id: "maintenance", subtitle: "elected periodic work, as this process saw it" }, maintenanceRegion.el),
    card("PostgreSQL", { id: "postgres" }, pgRegion.el));

  async function loadProcess() {
    const m = await get("/metrics");
    const off = encryptionOff(m.encryption);
    const badKey = off && m.encryption.reason.startsWith("bad key");
    processRegion.show(h("p", { class: "muted" }, `Answered by ${m.workerId} (pid ${m.pid}), up ${duration(m.uptime)}`),
      // A key that is set but cannot be used is a mistake to fix: said at the top.
      badKey ? h("p", { class: "error-text", dataset: { notice: "encryption" } },
        `${off}: ${m.encryption.reason.replace(/^bad key: /, "")}; queues with encryptionEnabled store plaintext.`) : null,
      tiles([
        { label: "Requests", value: rate(m.requests.rate), hint: `${num(m.requests.total)} in all` },
        { label: "Messages", value: rate(m.messages.rate), hint: `${num(m.messages.popped)} popped · ${num(m.messages.acked)} acked` },
        { label: "Pool", value: `${num(m.database.activeConnections)} / ${num(m.database.poolSize)}`, hint: `${num(m.database.waitingRequests)} waiting · max ${num(m.database.maxConnections)}` },
        { label: "Database calls", value: num(m.database.calls), hint: `${num(m.database.failures)} failed`, tone: m.database.failures ? "warn" : "" },
        { label: "Event loop lag", value: ms(m.eventLoopLag.maxMs), hint: `average ${ms(m.eventLoopLag.avgMs)}` },
        { label: "Memory (RSS)", value: bytes(m.memory.rss) },
        { label: "CPU time", value: `${duration(m.cpu.user)} user`, hint: `${duration(m.cpu.system)} system` },
        { key: "encryption", label: "Encryption at rest", value: off ? `off (${off.replace("encryption disabled: ", "")})` : "on",
          tone: badKey ? "warn" : "", hint: off ? "queues with encryptionEnabled store plaintext" : "QUEEN_ENCRYPTION_KEY in use" },
      ]));
    const f = m.fusion;
    internalsRegion.show(definitions([
      ["Lane", `${num(m.lane.active_flushers)} flushers · ${bytes(m.lane.pending_bytes)} pending · ${num(m.lane.segments)} segments · ${num(m.lane.bundles)} bundles · ${num(m.lane.failed_segments)} failed`],
      ["Claim fusion", `${num(f.claims.requests)} requests in ${num(f.claims.calls)} calls · ${num(f.claims.waiting)} waiting`],
      ["Ack fusion", `${num(f.acks.requests)} requests in ${num(f.acks.calls)} calls · ${num(f.acks.waiting)} waiting`],
      ["Long polls", `${num(m.longPolls.waiting)} parked · ${num(m.longPolls.wakeups)} wake-ups · LISTEN ${m.longPolls.listenerConnected ? "connected" : "disconnected"}`],
    ]));
    maintenance.update(m.maintenance);
    maintenanceRegion.show(maintenance.el);
  }

  async function loadWorkers() {
    const [status, series] = await Promise.all([get("/api/v1/status", rangeQuery()), get("/api/v1/analytics/system-metrics", rangeQuery())]);
    workers.update(status.workers);
    workersRegion.show(workers.el);
    const specs = [["cpu", "CPU user (%)", (p) => p.cpuUserPct], ["rss", "Memory RSS (MB)", (p) => p.rssMb],
                   ["loop", "Event loop lag max (ms)", (p) => p.eventLoopLagMaxMs], ["pool", "Pool connections in use", (p) => p.dbPoolActive]];
    const key = series.workers.map((w) => w.workerId).join("\u0000");
    if (charts.key !== key) {
      for (const c of charts.list || []) c.destroy();
      charts.key = key;
      charts.list = specs.map(([, title]) => new TimeChart({ title, series: series.workers.map((w) => ({ label: w.workerId, value: () => 0 })) }));
      chartsEl.replaceChildren(...charts.list.map((c) => c.el));
    }
    if (!series.workers.length) {
      chartsRegion.show(h("p", { class: "muted" }, "No samples in the range yet."));
      return;
    }
    chartsRegion.show(chartsEl);
    specs.forEach(([, , value], i) => charts.list[i].update(series.workers[0].points,
      series.workers.map((w) => w.points.map(value))));
  }

  async function loadSpool() {
    const b = await get("/api/v1/status/buffers");
    spoolRegion.show(tiles([
      { label: "Pending", value: num(b.pending), hint: "waiting for the database" },
      { label: "Failed", value: num(b.failed), tone: b.failed ? "warn" : "", hint: "moved to failed/" },
      { label: "Files", value: num(b.files) },
      { label: "Database", value: b.dbHealthy ? "answers" : "unreachable", tone: b.dbHealthy ? "" : "warn" },
    ]), b.directory ? h("p", { class: "muted" }, `Directory ${b.directory}`) : null,
    b.failed && can("admin") ? actionButton("Retry failed records…", () => confirmAction({
      title: "Retry the spool's failed records",
      confirmLabel: "Retry",
      lines: [`Puts the ${num(b.failed)} records of the spool's failed/ back in line for replay into the database.`],
      action: async () => {
        const r = await post("/api/v1/status/buffers/retry");
        toast(`${num(r.requeued)} record(s) requeued`);
        live.refreshNow();
        return r;
      },
    })) : null);
  }

  async function loadPostgres() {
    const pg = await get("/api/v1/analytics/postgres-stats");
    const d = pg.database;
    tables.update(pg.tables);
    pgRegion.show(tiles([
      { label: "Version", value: d.version, hint: d.name },
      { label: "Size", value: bytes(d.sizeBytes) },
      { label: "Backends", value: `${num(d.backends)} / ${num(d.maxConnections)}` },
      { label: "Cache hits", value: pct(d.cacheHitRatio * 100) },
      { label: "Commits", value: num(d.commits), hint: `${num(d.rollbacks)} rollbacks` },
      { label: "Deadlocks", value: num(d.deadlocks), tone: d.deadlocks ? "warn" : "" },
      { label: "Sessions", value: num(pg.activity.sessions), hint: `${num(pg.activity.active)} active · ${num(pg.activity.idleInTransaction)} idle in transaction` },
      { label: "Locks", value: num(pg.locks.granted), hint: `${num(pg.locks.waiting)} waiting`, tone: pg.locks.waiting ? "warn" : "" },
    ]), tables.el);
  }

  const guard = (load, region, what) => load().catch((error) => region.fail(error, what));
  return {
    title: "System",
    refresh: () => Promise.all([
      guard(loadProcess, processRegion, "Could not load this process's figures"),
      guard(loadWorkers, workersRegion, "Could not load the broker processes"),
      guard(loadSpool, spoolRegion, "Could not load the spool"),
      guard(loadPostgres, pgRegion, "Could not load PostgreSQL's figures"),
    ]),
    destroy: () => (charts.list || []).forEach((c) => c.destroy()),
  };
}
