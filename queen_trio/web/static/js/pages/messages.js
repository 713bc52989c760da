// Messages: filters (queue, partition, status, namespace, task, time window), newest first.

import { deleteMessageButton } from "../actions.js";
import { get } from "../api.js";
import { h, link } from "../dom.js";
import { fromLocalInput, num, time, toLocalInput } from "../format.js";
import { badge, Region, Table } from "../ui.js";

const PAGE = 50;
const FIELDS = ["queue", "partition", "status", "namespace", "task", "from", "to"];

export default function messages({ main, query }) {
  const filters = Object.fromEntries(FIELDS.map((f) => [f, query[f] || ""]));
  let offset = Number(query.offset) || 0;
  const region = new Region();
  const inputs = {
    queue: h("input", { value: filters.queue, spellcheck: "false", dataset: { key: "f-queue" } }),
    partition: h("input", { value: filters.partition, spellcheck: "false", dataset: { key: "f-partition" } }),
    status: h("select", {}, ["", "pending", "processing", "completed", "dead_letter"].map((s) => h("option", { value: s }, s || "any"))),
    namespace: h("input", { value: filters.namespace, spellcheck: "false" }),
    task: h("input", { value: filters.task, spellcheck: "false" }),
    from: h("input", { type: "datetime-local", step: 1, value: toLocalInput(filters.from) }),
    to: h("input", { type: "datetime-local", step: 1, value: toLocalInput(filters.to) }),
  };
  inputs.status.value = filters.status;
  const labels = { queue: "Queue", partition: "Partition", status: "Status", namespace: "Namespace", task: "Task", from: "From", to: "To" };
  const table = new Table({
    label: "Messages",
    key: (m) => `${m.partitionId}/${m.transactionId}`,
    columns: [
      { key: "created", label: "Created", render: (m) => h("span", { title: m.createdAt }, time(m.createdAt)) },
      { key: "queue", label: "Queue / partition", render: (m) => [link(["queues", m.queue], m.queue), " / ",
        link(["messages"], m.partition, { queue: m.queue, partition: m.partition })] },
      { key: "tx", label: "Transaction id", header: true, render: (m) => link(["messages", m.partitionId, m.transactionId], m.transactionId) },
      { key: "status", label: "Status", render: (m) => badge(m.status) },
      { key: "groups", label: "Groups done", num: true, render: (m) => `${num(m.busStatus.consumedBy)} / ${num(m.busStatus.totalGroups)}` },
      { key: "producer", label: "Producer", render: (m) => m.producerSub || "–" },
      { key: "trace", label: "Trace", render: (m) => link(["traces", "message", m.partitionId, m.transactionId], "timeline") },
      { key: "actions", label: "", render: (m) => deleteMessageButton(m) },
    ],
  });
  const pager = h("div", { class: "pager" });
  const prev = h("button", { type: "button", onclick: () => { offset = Math.max(0, offset - PAGE); apply(); } }, "← Newer");
  const next = h("button", { type: "button", onclick: () => { offset += PAGE; apply(); } }, "Older →");
  const where = h("span", { class: "muted" });
  pager.append(prev, where, next);

  const apply = () => {
    for (const f of FIELDS) filters[f] = f === "from" || f === "to" ? fromLocalInput(inputs[f].value) : inputs[f].value.trim();
    const params = new URLSearchParams(Object.entries({ ...filters, offset: offset || "" }).filter(([, v]) => v));
    history.replaceState(null, "", `#/messages${params.toString() ? `?${params}` : ""}`);
    load();
  };
  main.append(h("h1", {}, "Messages"),
    h("form", { class: "filters", role: "search", onsubmit: (e) => { e.preventDefault(); offset = 0; apply(); } },
      FIELDS.map((f) => h("label", {}, labels[f], inputs[f])),
      h("button", { type: "submit", class: "primary" }, "Filter")),
    h("p", { class: "muted" }, "Newest first, from the last hour unless From says otherwise; no payloads here: open a message to see its payload."),
    region.el, pager);

  async function load() {
    try {
      const reply = await get("/api/v1/messages", { ...filters, limit: PAGE, offset });
      table.empty = filters.from || filters.queue || filters.status
        ? "No message matches these filters: widen the time window with From, or clear a filter."
        : "No message in the last hour: set From further back, or push one with the Push button.";
      table.update(reply.messages);
      region.show(h("p", { class: "muted" }, `Delivery mode: ${reply.mode.type} (${reply.mode.hasQueueMode ? "queue mode, " : ""}${num(reply.mode.busGroupsCount)} named groups)`), table.el);
      prev.disabled = offset === 0;
      next.disabled = reply.messages.length < PAGE;
      where.textContent = reply.messages.length ? `${num(offset + 1)}–${num(offset + reply.messages.length)}` : "";
    } catch (error) {
      region.fail(error, "Could not load the messages");
    }
  }

  return { title: "Messages", refresh: load };
}
