// One queue: its configuration; its partitions with depth, oldest pending and lag; its
// consumer groups with their cursor on every partition; its newest messages.

import { deleteGroupButton, deleteQueueButton, seekButton } from "../actions.js";
import { get, path } from "../api.js";
import { h, link, replace } from "../dom.js";
import { ago, duration, groupLabel, num, time } from "../format.js";
import { openPop, openPush } from "../forms.js";
import { can } from "../session.js";
import { badge, card, cursorColumns, definitions, emptyState, encryptionOff, FIGURES_NOTE, figureColumns, figureTiles, Region, Table, tiles } from "../ui.js";

export default function queue({ main, params }) {
  const name = params.queue;
  const head = new Region();
  const config = new Region();
  const partitionsRegion = new Region();
  const groupsRegion = new Region();
  const messagesRegion = new Region();
  const timersRegion = new Region();
  const actions = h("div", { class: "actions" });

  let lagByPartition = new Map();
  const partitions = new Table({
    label: `Partitions of ${name}`,
    key: (p) => p.id,
    sort: "pending",
    empty: "No partitions: push a message to create one.",
    columns: [
      { key: "name", label: "Partition", header: true, value: (p) => p.name,
        render: (p) => link(["messages"], p.name, { queue: name, partition: p.name }, { title: "Messages of this partition" }) },
      ...figureColumns((p) => p.stats),
      { key: "oldest", label: "Oldest pending", num: true, value: (p) => oldestPending(p),
        render: (p) => h("span", { title: oldestPending(p) || "" }, oldestPending(p) ? ago(oldestPending(p)) : "–") },
      { key: "lag", label: "Lag", num: true, value: (p) => lagOf(p), render: (p) => duration(lagOf(p)) },
      { key: "groups", label: "Groups", num: true, value: (p) => p.groups, render: (p) => num(p.groups) },
      { key: "activity", label: "Last activity", num: true, value: (p) => p.lastActivity || "", render: (p) => ago(p.lastActivity) },
    ],
  });
  // The oldest message some group has not consumed (everything is pending where no group reads).
  const oldestPending = (p) => {
    const lag = lagByPartition.get(p.id);
    if (lag) return lag.oldest;
    return p.stats.pending > 0 ? p.oldestMessage : null;
  };
  const lagOf = (p) => {
    const lag = lagByPartition.get(p.id);
    if (lag) return lag.seconds;
    const oldest = oldestPending(p);
    return oldest ? Math.max(0, (Date.now() - new Date(oldest).getTime()) / 1000) : 0;
  };

  const recent = new Table({
    label: `Newest messages of ${name}`,
    key: (m) => `${m.partitionId}/${m.transactionId}`,
    empty: "No messages in this queue.",
    columns: [
      { key: "created", label: "Created", render: (m) => h("span", { title: m.createdAt }, time(m.createdAt)) },
      { key: "partition", label: "Partition", render: (m) => m.partition },
      { key: "tx", label: "Transaction id", header: true,
        render: (m) => link(["messages", m.partitionId, m.transactionId], m.transactionId) },
      { key: "status", label: "Status", render: (m) => badge(m.status) },
      { key: "trace", label: "Trace", render: (m) => link(["traces", "message", m.partitionId, m.transactionId], "timeline") },
    ],
  });

  main.append(
    h("div", { class: "page-head" },
      h("div", {}, h("p", { class: "crumbs" }, link(["queues"], "Queues"), " / "), h("h1", {}, name)), actions),
    head.el,
    card("Partitions", { id: "partitions" }, partitionsRegion.el),
    card("Consumer groups", { id: "groups", subtitle: "each group's cursor on every partition" }, groupsRegion.el),
    h("div", { class: "columns wide-first" },
      card("Newest messages", { id: "recent", actions: link(["messages"], "All messages", { queue: name }) }, messagesRegion.el),
      h("div", {},
        card("Timers", { id: "queue-timers", actions: link(["timers", name], "All its timers") }, timersRegion.el),
        card("Configuration", { id: "config" }, config.el))),
  );
  partitionsRegion.show(partitions.el);
  messagesRegion.show(recent.el);

  let actionsShown = false;
  function showActions(totals) {
    if (actionsShown) return;
    actionsShown = true;
    replace(actions,
      can("push") ? h("button", { type: "button", onclick: () => openPush(name) }, "Push here") : null,
      can("write") ? h("button", { type: "button", onclick: () => openPop(name) }, "Pop from here") : null,
      deleteQueueButton(name, totals));
  }

  async function loadQueue() {
    const [detail, status] = await Promise.all([
      get(path("/api/v1/resources/queues", name)), get(path("/api/v1/status/queues", name))]);
    const t = detail.totals;
    showActions(t);
    // A queue that asks for encryption while the broker cannot encrypt says so at the top.
    const off = status.queue.config.encryptionEnabled ? encryptionOff((await get("/health")).encryption) : null;
    head.show(h("p", { class: "muted" }, `namespace ${detail.namespace || "–"} · task ${detail.task || "–"} · priority ${detail.priority} · created ${time(detail.createdAt)}`),
      off ? h("p", { class: "error-text", dataset: { notice: "encryption" } },
        `This queue has encryptionEnabled, but ${off}: its messages are stored in plaintext (the broker's QUEEN_ENCRYPTION_KEY).`) : null,
      tiles([
        { key: "partitions", label: "Partitions", value: num(detail.partitions.length) },
        ...figureTiles(t),
      ]), h("p", { class: "muted figures-note" }, FIGURES_NOTE));
    config.show(definitions(Object.entries(status.queue.config).map(([k, v]) => [k, String(v)])));
    return detail;
  }

  async function loadGroups() {
    const all = (await get("/api/v1/consumer-groups")).filter((g) => g.queueName === name);
    const details = await Promise.all(all.map((g) => get(path("/api/v1/consumer-groups", g.name))));
    const lag = new Map();
    const blocks = all.map((g, i) => {
      const rows = (details[i][name] || { partitions: [] }).partitions;
      for (const r of rows) {
        const seen = lag.get(r.partitionId);
        if (r.oldestUnconsumedAt && (!seen || r.timeLagSeconds > seen.seconds)) {
          lag.set(r.partitionId, { seconds: r.timeLagSeconds, oldest: r.oldestUnconsumedAt });
        }
      }
      const cursors = new Table({
        label: `Cursors of ${groupLabel(g.name)} on ${name}`,
        key: (r) => r.partitionId,
        columns: cursorColumns((r) => seekButton({ group: g.name, queue: name, partition: r.partition })),
      });
      cursors.update(rows);
      return h("div", { class: "group-block", dataset: { group: g.name } },
        h("div", { class: "group-head" },
          h("h3", {}, link(["groups", g.name], groupLabel(g.name))), badge(g.state),
          h("span", { class: "muted" }, `${num(g.totalLag)} left · max lag ${duration(g.maxTimeLag)} · subscription ${g.subscriptionMode}`),
          h("span", { class: "actions" }, seekButton({ group: g.name, queue: name }, "Seek queue…"), deleteGroupButton(g.name, name))),
        cursors.el);
    });
    lagByPartition = lag;
    groupsRegion.show(blocks.length ? blocks
      : emptyState("No consumer group reads this queue yet: a pop with consumerGroup=NAME creates one (pops without a group show as queue mode)."));
  }

  async function loadMessages() {
    const list = await get(path("/api/v1/status/queues", name, "messages"), { limit: 20 });
    recent.update(list);
    messagesRegion.show(recent.el);
  }

  async function loadTimers() {
    const page = await get(path("/api/v1/timers", name), { limit: 1000 });
    const next = page.rows.map((t) => t.deliverAt).sort()[0];
    const count = `${num(page.rows.length)}${page.truncated ? "+" : ""}`;
    timersRegion.show(page.rows.length
      ? h("p", { dataset: { figure: "timers" } }, `${count} pending; next due ${time(next)}`)
      : h("p", { class: "muted", dataset: { figure: "timers" } }, "No pending timers."));
  }

  return {
    title: name,
    refresh: async () => {
      let detail;
      try {
        detail = await loadQueue();
      } catch (error) {
        if (error.status === 404) {
          replace(main, h("h1", {}, name), emptyState(`There is no queue ${name}: it appears on its first push.`,
            h("p", {}, link(["queues"], "See every queue"))));
          return;
        }
        head.fail(error, "Could not load the queue");
        return;
      }
      await Promise.all([
        loadGroups().catch((error) => groupsRegion.fail(error, "Could not load its consumer groups")),
        loadMessages().catch((error) => messagesRegion.fail(error, "Could not load its messages")),
        loadTimers().catch((error) => timersRegion.fail(error, "Could not load its timers")),
      ]);
      partitions.update(detail.partitions);
      partitionsRegion.show(partitions.el);
    },
  };
}
