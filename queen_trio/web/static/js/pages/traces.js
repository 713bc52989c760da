// Traces: the trace names, most recent first; each opens its timeline.

import { get } from "../api.js";
import { h, link } from "../dom.js";
import { ago, num } from "../format.js";
import { code, Region, Table } from "../ui.js";

const TRACE_EXAMPLE = `curl -X POST ${location.origin}/api/v1/traces -H 'content-type: application/json' \\
  -d '{"transactionId":"…","partitionId":"…","data":{"step":"charged"},"traceNames":["order-1"]}'`;

export default function traces({ main, query }) {
  const region = new Region();
  const filter = h("input", { type: "search", value: query.search || "", "aria-label": "Filter trace names", dataset: { key: "t-search" } });
  let names = [];
  const table = new Table({
    label: "Trace names",
    key: (t) => t.trace_name,
    sort: "last",
    columns: [
      { key: "name", label: "Trace", header: true, value: (t) => t.trace_name, render: (t) => link(["traces", t.trace_name], t.trace_name) },
      { key: "events", label: "Events", num: true, value: (t) => t.trace_count, render: (t) => num(t.trace_count) },
      { key: "messages", label: "Messages", num: true, value: (t) => t.message_count, render: (t) => num(t.message_count) },
      { key: "last", label: "Last seen", num: true, value: (t) => t.last_seen, render: (t) => h("span", { title: t.last_seen }, ago(t.last_seen)) },
    ],
  });
  const show = () => {
    const needle = filter.value.trim().toLowerCase();
    table.empty = names.length ? "No trace name matches."
      : ["No traces yet: a consumer records an event for a message, naming the traces it belongs to:", code(TRACE_EXAMPLE)];
    table.update(names.filter((t) => t.trace_name.toLowerCase().includes(needle)));
    region.show(table.el);
  };
  filter.addEventListener("input", () => {
    history.replaceState(null, "", filter.value ? `#/traces?search=${encodeURIComponent(filter.value)}` : "#/traces");
    show();
  });
  main.append(h("h1", {}, "Traces"),
    h("p", { class: "muted" }, "A trace name gathers the events that consumers recorded for messages across queues, partitions and groups: open one to see its timeline."),
    h("form", { class: "filters", role: "search", onsubmit: (e) => e.preventDefault() }, h("label", {}, "Name", filter)),
    region.el);
  return {
    title: "Traces",
    refresh: async () => {
      try {
        names = (await get("/api/v1/traces/names", { limit: 1000 })).trace_names;
        show();
      } catch (error) {
        region.fail(error, "Could not load the trace names");
      }
    },
  };
}
