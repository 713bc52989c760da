// Ephemeral queues: in-memory rings, lost on a restart; their declarations kept. One broker
// process owns them all (docs/ephemeral.md): the page names it.

import { get } from "../api.js";
import { h } from "../dom.js";
import { num } from "../format.js";
import { code, Region, Table } from "../ui.js";

const EXAMPLE = `curl -X POST ${location.origin}/api/v1/ephemeral/push -H 'content-type: application/json' \\
  -d '{"queue":"inbox","messages":[{"payload":{"ask":"price"}}]}'`;

function bytes(n) {
  if (n < 1024) return `${num(n)} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KiB`;
  return `${(n / 1024 / 1024).toFixed(1)} MiB`;
}

function drops(d) {
  const parts = Object.entries(d).filter(([, n]) => n > 0).map(([reason, n]) => `${reason} ${num(n)}`);
  return parts.length ? parts.join(", ") : "none";
}

export default function ephemeral({ main }) {
  const region = new Region();
  const owner = h("p", { class: "muted", dataset: { key: "eph-owner" } });
  const table = new Table({
    label: "Ephemeral queues",
    key: (q) => q.queue,
    sort: "queue",
    columns: [
      { key: "queue", label: "Queue", header: true, value: (q) => q.queue },
      { key: "tier", label: "Tier", value: (q) => q.tier },
      { key: "depth", label: "Depth", num: true, value: (q) => q.depth, render: (q) => num(q.depth) },
      { key: "bytes", label: "Bytes", num: true, value: (q) => q.bytes, render: (q) => bytes(q.bytes) },
      { key: "partitions", label: "Partitions", num: true, value: (q) => q.partitions, render: (q) => num(q.partitions) },
      { key: "groups", label: "Groups", num: true, value: (q) => q.groups, render: (q) => num(q.groups) },
      { key: "pushed", label: "Pushed", num: true, value: (q) => q.pushed, render: (q) => num(q.pushed) },
      { key: "popped", label: "Popped", num: true, value: (q) => q.popped, render: (q) => num(q.popped) },
      { key: "drops", label: "Dropped (by reason)", value: (q) => Object.values(q.drops).reduce((a, b) => a + b, 0), render: (q) => drops(q.drops) },
    ],
  });
  table.empty = ["No ephemeral queues yet: a push or a pop creates one, a configure declares one:", code(EXAMPLE)];
  main.append(h("h1", {}, "Ephemeral queues"),
    h("p", { class: "muted" }, "Queues in memory: their messages are lost on a restart or when the owner process changes; a declared queue comes back empty."),
    owner, region.el);
  return {
    title: "Ephemeral queues",
    refresh: async () => {
      try {
        const body = await get("/api/v1/ephemeral/queues");
        owner.textContent = `Owner process: ${body.owner} (incarnation ${body.incarnation || "none"}) · memory ${bytes(body.budget.usedBytes)} of ${bytes(body.budget.maxBytes)}`;
        table.update(body.queues);
        region.show(table.el);
      } catch (error) {
        region.fail(error, "Could not load the ephemeral queues");
      }
    },
  };
}
