// Timers: pending timers per queue with the next due time; one queue's pending timers, each
// with its payload (peeked on request) and a cancel (docs/timers.md).

import { cancelTimerButton } from "../actions.js";
import { get, path } from "../api.js";
import { h, link } from "../dom.js";
import { num, time } from "../format.js";
import { badge, card, code, emptyState, payload, Region, Table, tiles } from "../ui.js";

const SCHEDULE_EXAMPLE = `curl -X POST ${location.origin}/api/v1/timers -H 'content-type: application/json' \\
  -d '{"operations":[{"op":"schedule","queue":"orders","timerKey":"order-1/expire","payload":"eyJvcmRlciI6MX0=","delayMs":1800000,"txn":"order-1-expire"}]}'`;

const due = (iso) => {
  if (!iso) return "–";
  const seconds = (new Date(iso).getTime() - Date.now()) / 1000;
  if (seconds <= 0) return "due now";
  if (seconds < 90) return `in ${Math.round(seconds)} s`;
  if (seconds < 5400) return `in ${Math.round(seconds / 60)} min`;
  if (seconds < 129600) return `in ${Math.round(seconds / 3600)} h`;
  return `in ${Math.round(seconds / 86400)} d`;
};

function overview(main) {
  const region = new Region();
  const totals = new Region();
  const table = new Table({
    label: "Pending timers per queue",
    key: (q) => q.queue,
    sort: "next",
    descending: false,
    empty: ["No pending timers. A timer schedules a message into a queue after a delay, until it fires or is cancelled:", code(SCHEDULE_EXAMPLE)],
    columns: [
      { key: "queue", label: "Queue", header: true, value: (q) => q.queue, render: (q) => link(["timers", q.queue], q.queue) },
      { key: "pending", label: "Pending", num: true, value: (q) => q.pending, render: (q) => num(q.pending) },
      { key: "held", label: "Firing or backing off", num: true, value: (q) => q.held, render: (q) => num(q.held) },
      { key: "next", label: "Next due", num: true, value: (q) => q.nextDue, render: (q) => h("span", { title: q.nextDue }, due(q.nextDue)) },
    ],
  });
  main.append(h("h1", {}, "Timers"),
    h("p", { class: "muted" }, "Messages scheduled into a queue after a delay, delivered exactly once as an ordinary push, cancellable until they fire."),
    totals.el, card("Queues with pending timers", { id: "timer-queues" }, region.el));
  return {
    title: "Timers",
    refresh: async () => {
      try {
        const body = await get("/api/v1/status/timers");
        const next = body.queues.map((q) => q.nextDue).filter(Boolean).sort()[0];
        totals.show(tiles([
          { key: "pending", label: "Pending timers", value: num(body.pending) },
          { key: "queues", label: "Queues", value: num(body.queues.length) },
          { key: "next", label: "Next due", value: next ? due(next) : "–" },
        ]));
        table.update(body.queues);
        region.show(table.el);
      } catch (error) {
        region.fail(error, "Could not load the timers");
      }
    },
  };
}

function ofQueue(main, queue) {
  const region = new Region();
  const payloads = new Map(); // timerKey -> its peeked payload, kept across refreshes
  let limit = 100;
  const table = new Table({
    label: `Pending timers of ${queue}`,
    key: (t) => t.timerKey,
    sort: "due",
    descending: false,
    empty: "No pending timer in this queue.",
    columns: [
      { key: "key", label: "Timer key", header: true, value: (t) => t.timerKey, render: (t) => t.timerKey },
      { key: "due", label: "Deliver at", num: true, value: (t) => t.deliverAt,
        render: (t) => h("span", { title: t.deliverAt }, `${time(t.deliverAt)} (${due(t.deliverAt)})`) },
      { key: "partition", label: "Partition", value: (t) => t.partition, render: (t) => t.partition },
      { key: "txn", label: "txn", value: (t) => t.txn, render: (t) => t.txn },
      { key: "state", label: "State", value: (t) => (t.claimed ? "firing" : t.attempts ? "backoff" : "scheduled"),
        render: (t) => (t.claimed ? badge("firing", "processing") : t.attempts
          ? h("span", { title: t.lastError || "" }, badge(`backoff · ${t.attempts} failed`, "dead"))
          : badge("scheduled", "pending")) },
      { key: "payload", label: "Payload", render: (t) => payloadCell(t) },
      { key: "cancel", label: "", render: (t) => cancelTimerButton({ ...t, queue }) },
    ],
  });
  function payloadCell(t) {
    if (payloads.has(t.timerKey)) return payloads.get(t.timerKey);
    return h("button", { type: "button", dataset: { action: "peek", key: `peek-${t.timerKey}` }, onclick: async (event) => {
      const peeked = await get(path("/api/v1/timers", queue, t.timerKey));
      let shown;
      if (!peeked.found) shown = h("span", { class: "muted" }, "no longer pending");
      else if (peeked.encrypted) shown = h("span", { class: "muted" }, `encrypted (${num(t.payloadBytes)} bytes)`);
      else {
        let value;
        try {
          value = JSON.parse(new TextDecoder().decode(Uint8Array.from(atob(peeked.payload), (c) => c.charCodeAt(0))));
        } catch {
          value = peeked.payload;
        }
        shown = payload(value, "Payload");
        shown.open = true;
      }
      payloads.set(t.timerKey, shown);
      event.target.replaceWith(shown);
    } }, "Show");
  }
  const more = h("button", { type: "button", hidden: true, onclick: () => { limit += 100; refresh(); } }, "Show more");
  main.append(
    h("div", { class: "page-head" },
      h("div", {}, h("p", { class: "crumbs" }, link(["timers"], "Timers"), " / "), h("h1", {}, queue)),
      h("div", { class: "actions" }, link(["queues", queue], "Queue page"))),
    card("Pending timers", { id: "timers", subtitle: "the earliest due first; cancel until a broker fires one" }, region.el, more));
  async function refresh() {
    try {
      const page = await get(path("/api/v1/timers", queue), { limit: Math.min(limit, 1000) });
      table.update(page.rows);
      more.hidden = !page.truncated || limit >= 1000;
      region.show(page.rows.length || page.truncated ? table.el
        : emptyState(`No pending timer in ${queue}.`, h("p", {}, link(["timers"], "Every queue's timers"))));
    } catch (error) {
      region.fail(error, "Could not load the timers");
    }
  }
  return { title: `Timers of ${queue}`, refresh };
}

export default function timers({ main, params }) {
  return params.queue ? ofQueue(main, params.queue) : overview(main);
}

