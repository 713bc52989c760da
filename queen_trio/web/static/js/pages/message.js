// One message: its payload (pretty JSON), where it stands for every group, its dead letters
// (retry), delete, and its trace events.

import { deleteMessage, retryButton } from "../actions.js";
import { get, path } from "../api.js";
import { h, link, replace } from "../dom.js";
import { groupLabel, json, num, time } from "../format.js";
import { can } from "../session.js";
import { actionButton, badge, card, code, definitions, emptyState, Region, Table } from "../ui.js";

export default function message({ main, params }) {
  const { partitionId, transactionId } = params;
  const meta = new Region();
  const body = new Region();
  const groupsRegion = new Region();
  const dlqRegion = new Region();
  const tracesRegion = new Region();
  const actions = h("div", { class: "actions" });
  main.append(h("div", { class: "page-head" },
    h("div", {}, h("p", { class: "crumbs" }, link(["messages"], "Messages"), " / "), h("h1", {}, transactionId)), actions),
  card("Details", { id: "msg-details" }, meta.el),
  h("div", { class: "columns" },
    card("Payload", { id: "payload" }, body.el),
    card("Consumer groups", { id: "msg-groups" }, groupsRegion.el)),
  card("Dead letters", { id: "msg-dlq" }, dlqRegion.el),
  card("Trace events", { id: "msg-traces", actions: link(["traces", "message", partitionId, transactionId], "Timeline") }, tracesRegion.el));

  const groups = new Table({
    label: "Where the message stands for each group",
    key: (g) => g.name,
    empty: "No consumer group has read this partition yet.",
    columns: [
      { key: "name", label: "Group", header: true, render: (g) => link(["groups", g.name], groupLabel(g.name)) },
      { key: "status", label: "Status", render: (g) => badge(g.status) },
      { key: "consumed", label: "Consumed", render: (g) => (g.consumed ? "yes" : "no") },
      { key: "lease", label: "Lease until", render: (g) => (g.leaseExpiresAt ? time(g.leaseExpiresAt) : "–") },
    ],
  });
  let current = null;
  const dead = new Table({
    label: "Dead letters of the message",
    key: (d) => d.consumerGroup,
    empty: "Not dead-lettered by any group.",
    columns: [
      { key: "group", label: "Group", header: true, render: (d) => groupLabel(d.consumerGroup) },
      { key: "error", label: "Error", render: (d) => d.errorMessage || "–" },
      { key: "retries", label: "Retries", num: true, render: (d) => num(d.retryCount) },
      { key: "failed", label: "Failed at", render: (d) => time(d.failedAt) },
      { key: "retry", label: "", render: (d) => retryButton(current, d.consumerGroup) },
    ],
  });
  const events = new Table({
    label: "Trace events of the message",
    key: (e) => e.id,
    empty: "No trace events: consumers record them with POST /api/v1/traces.",
    columns: [
      { key: "at", label: "Time", render: (e) => time(e.created_at) },
      { key: "type", label: "Event", render: (e) => badge(e.event_type, "event-type") },
      { key: "group", label: "Group", render: (e) => e.consumer_group || "–" },
      { key: "names", label: "Traces", render: (e) => (e.trace_names || []).map((n) => link(["traces", n], n, null, { class: "chip" })) },
      { key: "data", label: "Data", render: (e) => code(json(e.data)) },
    ],
  });

  return {
    title: transactionId,
    refresh: async () => {
      let m;
      try {
        m = await get(path("/api/v1/messages", partitionId, transactionId));
      } catch (error) {
        if (error.status === 404) {
          replace(main, h("h1", {}, transactionId), emptyState("No such message: it was deleted, or retention removed it.",
            h("p", {}, link(["messages"], "See the messages"))));
          return;
        }
        meta.fail(error, "Could not load the message");
        return;
      }
      current = m;
      if (!actions.childElementCount) {
        replace(actions,
          can("write") && m.deadLetters.length ? retryButton(m) : null,
          can("write") ? actionButton("Delete message…", () => deleteMessage(m, () => { location.hash = "#/messages"; }),
            { danger: true, dataset: { action: "delete-message" } }) : null);
      }
      meta.show(h("p", {}, link(["queues", m.queue], m.queue), ` / ${m.partition} · `, badge(m.status)),
        definitions([
          ["Message id", m.id], ["Partition id", m.partitionId], ["Created", `${time(m.createdAt)} (${m.createdAt})`],
          ["Producer", m.producerSub || "–"], ["Trace id", m.traceId || "–"], ["Encrypted", m.isEncrypted === null ? "unknown" : m.isEncrypted ? "yes" : "no"],
          ["Retries", num(m.retryCount)], ["Lease until", m.leaseExpiresAt ? time(m.leaseExpiresAt) : "–"],
          ["Mode", `${m.mode.type}: ${num(m.mode.consumedByGroups)} of ${num(m.mode.busGroupsCount)} named groups done`],
          ["Queue config", `lease ${m.queueConfig.leaseTime} s · ${m.queueConfig.retryLimit} retries · priority ${m.queueConfig.priority}`],
        ]));
      body.show(m.payloadError
        ? emptyState(`The payload cannot be read: ${m.payloadError}.`)
        : code(json(m.payload)));
      groups.update(m.consumerGroups);
      groupsRegion.show(groups.el);
      dead.update(m.deadLetters);
      dlqRegion.show(dead.el);
      try {
        const t = await get(path("/api/v1/traces", partitionId, transactionId));
        events.update(t.traces);
        tracesRegion.show(events.el);
      } catch (error) {
        tracesRegion.fail(error, "Could not load the trace events");
      }
    },
  };
}
