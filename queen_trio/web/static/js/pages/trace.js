// A trace's timeline: every event of a trace name (or of one message) across queues,
// partitions and consumer groups, in time order, with the messages' payloads. Lanes on top
// show where each event happened; the list below reads top to bottom in time.

import { get, path } from "../api.js";
import { h, link, replace } from "../dom.js";
import { duration, groupLabel, json, num, time } from "../format.js";
import { badge, card, code, emptyState, payload, Region } from "../ui.js";

const PAGE = 1000;
const MAX_EVENTS = 5000;

async function byName(name) {
  const events = [];
  let total = 0;
  do {
    const reply = await get(path("/api/v1/traces/by-name", name), { limit: PAGE, offset: events.length });
    total = reply.total;
    events.push(...reply.traces);
    if (!reply.traces.length) break;
  } while (events.length < total && events.length < MAX_EVENTS);
  return { events, total };
}

async function byMessage(partitionId, transactionId) {
  const [reply, message] = await Promise.all([
    get(path("/api/v1/traces", partitionId, transactionId)),
    get(path("/api/v1/messages", partitionId, transactionId)).catch(() => null)]);
  const events = reply.traces.map((e) => ({
    ...e, transaction_id: transactionId, partition_id: partitionId,
    queue_name: message ? message.queue : "?", partition_name: message ? message.partition : "?",
    message_payload: message ? message.payload : undefined,
  }));
  return { events, total: events.length };
}

export function inTimeOrder(events) {
  return [...events].sort((a, b) => (a.created_at < b.created_at ? -1 : a.created_at > b.created_at ? 1
                                                                         : a.id < b.id ? -1 : 1));
}

export default function trace({ main, params }) {
  const forMessage = !!params.partitionId;
  const title = forMessage ? `Message ${params.transactionId}` : params.name;
  const summary = new Region();
  const lanesRegion = new Region();
  const listRegion = new Region();
  main.append(h("div", { class: "page-head" }, h("div", {},
    h("p", { class: "crumbs" }, link(["traces"], "Traces"), " / ", forMessage ? link(["messages", params.partitionId, params.transactionId], "message") : null),
    h("h1", {}, title))),
  summary.el,
  card("Lanes", { id: "lanes", subtitle: "one per queue / partition / group; select an event to jump to it" }, lanesRegion.el),
  card("Events in time order", { id: "events" }, listRegion.el));
  let shown = "";

  function render(events, total) {
    const ordered = inTimeOrder(events);
    const start = new Date(ordered[0].created_at).getTime();
    const end = new Date(ordered[ordered.length - 1].created_at).getTime();
    const span = Math.max(1, end - start);
    const laneOf = (e) => `${e.queue_name} / ${e.partition_name} · ${e.consumer_group ? groupLabel(e.consumer_group) : "no group"}`;
    const lanes = [...new Set(ordered.map(laneOf))];
    const messages = new Set(ordered.map((e) => `${e.partition_id}/${e.transaction_id}`));
    summary.show(h("p", { class: "muted" },
      `${num(ordered.length)} event${ordered.length === 1 ? "" : "s"}${total > ordered.length ? ` (the first ${num(ordered.length)} of ${num(total)})` : ""} · ${num(messages.size)} message(s) · ${num(lanes.length)} lane(s) · ${duration((end - start) / 1000)} from first to last`));
    lanesRegion.show(h("div", { class: "lanes" }, lanes.map((lane) => {
      const track = h("div", { class: "track" });
      ordered.forEach((e, i) => {
        if (laneOf(e) !== lane) return;
        const dot = h("a", { class: "dot", href: `#event-${i + 1}`, "aria-label": `event ${i + 1}: ${e.event_type} at ${time(e.created_at)}`,
                             title: `#${i + 1} ${e.event_type} · ${time(e.created_at)}`, onclick: (ev) => {
          ev.preventDefault();
          const row = document.getElementById(`event-${i + 1}`);
          row.scrollIntoView({ block: "center" });
          row.focus();
        } }, String(i + 1));
        // Position from the data: CSSOM, which the page's CSP allows (no inline style).
        dot.style.left = `${((new Date(e.created_at).getTime() - start) / span) * 100}%`;
        track.append(dot);
      });
      return h("div", { class: "lane" }, h("div", { class: "lane-label" }, lane), track);
    })));
    listRegion.show(h("ol", { class: "timeline" }, ordered.map((e, i) => h("li", { id: `event-${i + 1}`, tabindex: -1, class: "event", dataset: { eventId: e.id } },
      h("div", { class: "event-head" },
        h("span", { class: "seq" }, `#${i + 1}`),
        h("time", { datetime: e.created_at, title: e.created_at }, time(e.created_at)),
        h("span", { class: "muted" }, `+${duration((new Date(e.created_at).getTime() - start) / 1000)}`),
        badge(e.event_type, "event-type"),
        h("span", { class: "where" }, link(["queues", e.queue_name], e.queue_name), ` / ${e.partition_name}`),
        e.consumer_group ? h("span", {}, "group ", link(["groups", e.consumer_group], groupLabel(e.consumer_group))) : null,
        h("span", {}, "message ", link(["messages", e.partition_id, e.transaction_id], e.transaction_id)),
        (e.trace_names || []).filter((n) => n !== params.name).map((n) => link(["traces", n], n, null, { class: "chip" }))),
      h("div", { class: "event-body" }, code(json(e.data)),
        e.message_payload !== undefined ? payload(e.message_payload, "Message payload") : null)))));
  }

  return {
    title,
    refresh: async () => {
      try {
        const { events, total } = forMessage ? await byMessage(params.partitionId, params.transactionId) : await byName(params.name);
        if (!events.length) {
          replace(summary.body);
          lanesRegion.show(emptyState(forMessage ? "No trace events for this message: consumers record them with POST /api/v1/traces."
                                                 : `No events under the trace name ${params.name}.`));
          listRegion.show();
          return;
        }
        // Rebuild only when something changed: a live refresh must not move the reader.
        const stamp = `${events.length}:${events[events.length - 1].id}`;
        if (stamp === shown) return;
        shown = stamp;
        render(events, total);
      } catch (error) {
        listRegion.fail(error, "Could not load the trace");
      }
    },
  };
}
