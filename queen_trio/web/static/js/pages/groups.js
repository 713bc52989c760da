// Consumer groups: every (group, queue) with its lag and state; seek and delete.

import { deleteGroupButton, seekButton } from "../actions.js";
import { get } from "../api.js";
import { h, link } from "../dom.js";
import { ago, duration, groupLabel, num } from "../format.js";
import { badge, Region, Table } from "../ui.js";

export default function groups({ main, query }) {
  const region = new Region();
  const filter = h("input", { type: "search", value: query.search || "", placeholder: "group or queue",
                               "aria-label": "Filter consumer groups", dataset: { key: "group-search" } });
  const state = h("select", { "aria-label": "State" },
    ["", "Stable", "Lagging", "Dead"].map((s) => h("option", { value: s }, s || "every state")));
  state.value = query.state || "";
  let rows = [];
  const table = new Table({
    label: "Consumer groups",
    key: (g) => JSON.stringify([g.name, g.queueName]),
    sort: "time",
    columns: [
      { key: "name", label: "Group / queue", header: true, value: (g) => `${g.name}\n${g.queueName}`,
        render: (g) => [link(["groups", g.name], groupLabel(g.name)), h("div", { class: "sub" }, link(["queues", g.queueName], g.queueName))] },
      { key: "state", label: "State", value: (g) => g.state, render: (g) => badge(g.state) },
      { key: "lagging", label: "Partitions behind", num: true, value: (g) => g.partitionsWithLag,
        render: (g) => `${num(g.partitionsWithLag)} of ${num(g.members)}` },
      { key: "left", label: "Left", num: true, value: (g) => g.totalLag, render: (g) => num(g.totalLag) },
      { key: "time", label: "Time lag", num: true, value: (g) => g.maxTimeLag, render: (g) => duration(g.maxTimeLag) },
      { key: "processing", label: "In flight", num: true, value: (g) => g.processing, render: (g) => num(g.processing) },
      { key: "dlq", label: "Dead letters", num: true, value: (g) => g.deadLetters, render: (g) => num(g.deadLetters) },
      { key: "last", label: "Last consumed", value: (g) => g.lastConsumedAt || "", render: (g) => ago(g.lastConsumedAt) },
      { key: "actions", label: "Actions", render: (g) => h("span", { class: "actions" },
        seekButton({ group: g.name, queue: g.queueName }), deleteGroupButton(g.name, g.queueName)) },
    ],
  });
  const show = () => {
    const needle = filter.value.trim().toLowerCase();
    const picked = rows.filter((g) => (!needle || g.name.toLowerCase().includes(needle) || g.queueName.toLowerCase().includes(needle))
      && (!state.value || g.state === state.value));
    table.empty = rows.length
      ? "No consumer group matches: clear the filters."
      : "No consumer groups yet: a pop with consumerGroup=NAME creates one; pops without a group read in queue mode.";
    table.update(picked);
    region.show(table.el);
  };
  const changed = () => {
    const params = new URLSearchParams(Object.entries({ search: filter.value.trim(), state: state.value }).filter(([, v]) => v));
    history.replaceState(null, "", `#/groups${params.toString() ? `?${params}` : ""}`);
    show();
  };
  filter.addEventListener("input", changed);
  state.addEventListener("change", changed);
  main.append(h("h1", {}, "Consumer groups"),
    h("form", { class: "filters", role: "search", onsubmit: (e) => e.preventDefault() },
      h("label", {}, "Name", filter), h("label", {}, "State", state)),
    h("p", { class: "muted" }, "Lagging: the oldest unconsumed message is over 5 minutes old. Dead: nothing consumed yet and messages left."),
    region.el);

  return {
    title: "Consumer groups",
    refresh: async () => {
      try {
        rows = await get("/api/v1/consumer-groups");
        show();
      } catch (error) {
        region.fail(error, "Could not load the consumer groups");
      }
    },
  };
}
