// Consumers: the live consume() runs that publish supervision records, by application group;
// stale ones (no heartbeat within their timeout) marked.

import { get } from "../api.js";
import { h } from "../dom.js";
import { duration, groupLabel, num } from "../format.js";
import { badge, card, code, Region, Table } from "../ui.js";

const EXAMPLE = `await client.queue("orders").group("billing").supervision({"group": "billing-app"}).consume(handler)`;

function stateBadge(i) {
  if (i.torn) return badge("unreadable", "warn");
  if (i.state === "stopped") return badge("stopped", "muted");
  if (i.stale) return badge("stale", "bad");
  return badge(i.state || "running", "ok");
}

export default function consumers({ main }) {
  const region = new Region();
  main.append(h("h1", {}, "Consumers"),
    h("p", { class: "muted" }, "Consumers that opted into supervision publish their status every 10 s (a 60 s record). Observation only: nothing here restarts or scales them."),
    region.el);
  return {
    title: "Consumers",
    refresh: async () => {
      try {
        const reply = await get("/api/v1/resources/consumers");
        if (!reply.groups.length) {
          region.show(h("p", {}, "No supervised consumer is running. Turn it on in the client:"), code(EXAMPLE));
          return;
        }
        region.show(...reply.groups.map((g) => {
          const table = new Table({
            label: `Instances of ${g.group}`,
            key: (i) => i.instance,
            columns: [
              { key: "instance", label: "Instance", header: true, render: (i) => h("code", {}, i.instance.slice(0, 12)) },
              { key: "state", label: "State", render: stateBadge },
              { key: "host", label: "Host / pid", render: (i) => `${i.hostname || "?"} / ${i.pid ?? "?"}` },
              { key: "queue", label: "Queue · group", render: (i) => (i.pools || []).map((p) => `${p.queue || p.namespace || p.task || "?"} · ${groupLabel(p.consumer_group || "")}`).join(", ") },
              { key: "busy", label: "Busy / running", num: true, render: (i) => (i.pools || []).map((p) => `${num(p.busy)}/${num(p.running)}`).join(", ") },
              { key: "done", label: "Completed", num: true, render: (i) => num((i.pools || []).reduce((n, p) => n + (p.completed || 0), 0)) },
              { key: "failed", label: "Failed", num: true, render: (i) => num((i.pools || []).reduce((n, p) => n + (p.failed || 0), 0)) },
              { key: "uptime", label: "Uptime", num: true, render: (i) => (i.uptimeSeconds == null ? "–" : duration(i.uptimeSeconds)) },
            ],
          });
          table.update(g.instances);
          return card(g.group, { subtitle: `${num(g.live)} live, ${num(g.stale)} stale` }, table.el);
        }));
      } catch (error) {
        region.fail(error, "Could not load the consumers");
      }
    },
  };
}
