// Dead letters: error reasons, payloads, retry.

import { retryButton } from "../actions.js";
import { get } from "../api.js";
import { h, link } from "../dom.js";
import { groupLabel, num, time } from "../format.js";
import { card, payload, Region, Table } from "../ui.js";

const PAGE = 50;

export default function dlq({ main, query }) {
  const filters = { queue: query.queue || "", consumerGroup: query.consumerGroup || "" };
  let offset = 0;
  const region = new Region();
  const reasons = new Region();
  const queue = h("input", { value: filters.queue, spellcheck: "false", dataset: { key: "d-queue" } });
  const group = h("input", { value: filters.consumerGroup, spellcheck: "false", dataset: { key: "d-group" } });
  const table = new Table({
    label: "Dead letters",
    key: (d) => `${d.partitionId}/${d.transactionId}/${d.consumerGroup}`,
    columns: [
      { key: "failed", label: "Failed at", render: (d) => h("span", { title: d.failedAt }, time(d.failedAt)) },
      { key: "where", label: "Queue / partition", render: (d) => [link(["queues", d.queue], d.queue), ` / ${d.partition}`] },
      { key: "group", label: "Group", render: (d) => link(["groups", d.consumerGroup], groupLabel(d.consumerGroup)) },
      { key: "tx", label: "Message", header: true, render: (d) => link(["messages", d.partitionId, d.transactionId], d.transactionId) },
      { key: "error", label: "Error", render: (d) => h("span", { class: "error-text" }, d.errorMessage || "–") },
      { key: "retries", label: "Retries", num: true, render: (d) => num(d.retryCount) },
      { key: "payload", label: "Payload", render: (d) => (d.data === null ? "(does not decrypt)" : payload(d.data, "show")) },
      { key: "trace", label: "Trace", render: (d) => link(["traces", "message", d.partitionId, d.transactionId], "timeline") },
      { key: "retry", label: "", render: (d) => retryButton(d, d.consumerGroup) },
    ],
  });
  const reasonTable = new Table({
    label: "Error reasons",
    key: (r) => r.error,
    columns: [
      { key: "error", label: "Error", header: true, render: (r) => h("span", { class: "error-text" }, r.error) },
      { key: "count", label: "Dead letters", num: true, render: (r) => num(r.count) },
    ],
  });
  const prev = h("button", { type: "button", onclick: () => { offset = Math.max(0, offset - PAGE); load(); } }, "← Newer");
  const next = h("button", { type: "button", onclick: () => { offset += PAGE; load(); } }, "Older →");
  const where = h("span", { class: "muted" });
  main.append(h("h1", {}, "Dead letters"),
    h("form", { class: "filters", role: "search", onsubmit: (e) => {
      e.preventDefault();
      Object.assign(filters, { queue: queue.value.trim(), consumerGroup: group.value.trim() });
      offset = 0;
      const params = new URLSearchParams(Object.entries(filters).filter(([, v]) => v));
      history.replaceState(null, "", `#/dlq${params.toString() ? `?${params}` : ""}`);
      load();
    } }, h("label", {}, "Queue", queue), h("label", {}, "Consumer group", group),
    h("button", { type: "submit", class: "primary" }, "Filter")),
    card("Error reasons", { id: "reasons", subtitle: "on this page" }, reasons.el),
    region.el, h("div", { class: "pager" }, prev, where, next));

  async function load() {
    try {
      const reply = await get("/api/v1/dlq", { ...filters, limit: PAGE, offset });
      table.empty = "No dead letters: a message lands here when a consumer acks it as failed past its queue's retryLimit, or with status dlq.";
      table.update(reply.messages);
      const counts = new Map();
      for (const d of reply.messages) counts.set(d.errorMessage || "(no error text)", (counts.get(d.errorMessage || "(no error text)") || 0) + 1);
      reasonTable.empty = "No error reasons.";
      reasonTable.update([...counts].map(([error, count]) => ({ error, count })).sort((a, b) => b.count - a.count));
      reasons.show(reasonTable.el);
      region.show(h("p", { class: "muted" }, `${num(reply.total)} dead letter${reply.total === 1 ? "" : "s"}, newest failure first`), table.el);
      prev.disabled = offset === 0;
      next.disabled = offset + reply.messages.length >= reply.total;
      where.textContent = reply.messages.length ? `${num(offset + 1)}–${num(offset + reply.messages.length)} of ${num(reply.total)}` : "";
    } catch (error) {
      region.fail(error, "Could not load the dead letters");
    }
  }

  return { title: "Dead letters", refresh: load };
}
