// Queues: every queue with its depth, partitions, namespace and task; searchable.

import { get } from "../api.js";
import { h, link } from "../dom.js";
import { ago, num } from "../format.js";
import { code, FIGURES_NOTE, figureColumns, PUSH_EXAMPLE, Region, Table } from "../ui.js";

const LIMIT = 1000;

export default function queues({ main, query }) {
  const filters = { search: query.search || "", namespace: query.namespace || "", task: query.task || "" };
  const region = new Region();
  const table = new Table({
    label: "Queues",
    key: (q) => q.name,
    sort: "pending",
    pageSize: 100,
    columns: [
      { key: "name", label: "Queue", header: true, value: (q) => q.name, render: (q) => link(["queues", q.name], q.name) },
      { key: "namespace", label: "Namespace", value: (q) => q.namespace || "", render: (q) => q.namespace || "–" },
      { key: "task", label: "Task", value: (q) => q.task || "", render: (q) => q.task || "–" },
      { key: "partitions", label: "Partitions", num: true, value: (q) => q.partitions, render: (q) => num(q.partitions) },
      ...figureColumns((q) => q.messages),
      { key: "activity", label: "Last activity", num: true, value: (q) => q.lastActivity || "", render: (q) => h("span", { title: q.lastActivity || "" }, ago(q.lastActivity)) },
    ],
  });
  const count = h("p", { class: "muted", "aria-live": "polite" });
  const search = h("input", { type: "search", value: filters.search, placeholder: "part of a name",
                               "aria-label": "Filter queues by name", dataset: { key: "queue-search" } });
  const namespace = h("select", { "aria-label": "Namespace" }, h("option", { value: "" }, "every namespace"));
  const task = h("select", { "aria-label": "Task" }, h("option", { value: "" }, "every task"));
  let debounce = null;
  const changed = () => {
    Object.assign(filters, { search: search.value.trim(), namespace: namespace.value, task: task.value });
    const params = new URLSearchParams(Object.entries(filters).filter(([, v]) => v));
    history.replaceState(null, "", `#/queues${params.toString() ? `?${params}` : ""}`);
    clearTimeout(debounce);
    debounce = setTimeout(load, 150);
  };
  search.addEventListener("input", changed);
  namespace.addEventListener("change", changed);
  task.addEventListener("change", changed);

  main.append(
    h("h1", {}, "Queues"),
    h("form", { class: "filters", role: "search", onsubmit: (e) => e.preventDefault() },
      h("label", {}, "Name", search), h("label", {}, "Namespace", namespace), h("label", {}, "Task", task)),
    count, region.el, h("p", { class: "muted figures-note" }, FIGURES_NOTE));

  // The namespace and task choices come from the queues listed (each names its own), so the
  // page asks the broker for one list only.
  const facets = { namespace: new Set(), task: new Set() };
  function addFacets(list) {
    for (const [field, select] of [["namespace", namespace], ["task", task]]) {
      const known = facets[field];
      const fresh = [...new Set([filters[field], ...list.map((q) => q[field])])].filter((v) => v && !known.has(v));
      for (const value of fresh.sort()) {
        known.add(value);
        select.append(h("option", { value }, value));
      }
      select.value = filters[field];
    }
  }

  async function load() {
    try {
      const reply = await get("/api/v1/resources/queues", { ...filters, limit: LIMIT });
      const list = reply.queues;
      const filtered = filters.search || filters.namespace || filters.task;
      table.empty = filtered
        ? `No queue matches: clear the filters to see every queue.`
        : ["No queues yet: push a message with the Push button above, or with curl:", code(PUSH_EXAMPLE)];
      addFacets(list);
      table.update(list);
      count.textContent = list.length === LIMIT
        ? `The first ${LIMIT} queues, newest first: narrow the search to find others.`
        : `${num(list.length)} queue${list.length === 1 ? "" : "s"}`;
      region.show(table.el);
    } catch (error) {
      region.fail(error, "Could not load the queues");
    }
  }

  return {
    title: "Queues",
    refresh: load,
  };
}
