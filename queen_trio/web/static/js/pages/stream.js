// One streams query: its source, sink and consumer group, and its state shards (one per source
// partition) with their rows, sizes, watermark, lag and last cycle.

import { get, path } from "../api.js";
import { h, link } from "../dom.js";
import { ago, bytes, num, time } from "../format.js";
import { card, definitions, emptyState, Region, Table, tiles } from "../ui.js";

export default function stream({ main, params }) {
  const name = params.name;
  const region = new Region();
  main.append(h("div", { class: "page-head" },
    h("div", {}, h("p", { class: "crumbs" }, link(["streams"], "Streams"), " / "), h("h1", {}, name))),
  region.el);
  const table = new Table({
    label: `State shards of ${name}`,
    key: (s) => s.partitionId,
    sort: "partition",
    columns: [
      { key: "partition", label: "Source partition", header: true, value: (s) => s.partition, render: (s) => s.partition },
      { key: "lag", label: "Lag", num: true, value: (s) => s.lag ?? -1, render: (s) => (s.lag === null ? "–" : num(s.lag)) },
      { key: "rows", label: "State rows", num: true, value: (s) => s.stateRows, render: (s) => num(s.stateRows) },
      { key: "bytes", label: "State size", num: true, value: (s) => s.stateBytes, render: (s) => bytes(s.stateBytes) },
      { key: "wm", label: "Watermark", value: (s) => s.watermarkMs ?? 0,
        render: (s) => (s.watermarkMs === null ? "–" : time(new Date(s.watermarkMs).toISOString())) },
      { key: "last", label: "Last cycle", value: (s) => s.lastCycleAt || "", render: (s) => ago(s.lastCycleAt) },
      { key: "updated", label: "State updated", value: (s) => s.updatedAt, render: (s) => ago(s.updatedAt) },
    ],
  });
  table.empty = "No state: the query keeps none (a stateless map or filter), or every window was emitted.";
  return {
    title: name,
    refresh: async () => {
      try {
        const q = await get(path("/streams/v1/queries", name));
        table.update(q.stateShards);
        region.show(
          tiles([{ label: "Lag", value: num(q.lag), key: "lag" },
                 { label: "State shards", value: num(q.shards), key: "shards" },
                 { label: "State rows", value: num(q.stateRows), key: "rows" },
                 { label: "State size", value: bytes(q.stateBytes), key: "bytes" },
                 { label: "Last cycle", value: ago(q.lastCycleAt), key: "last" }]),
          card("Query", {}, definitions([
            ["Source queue", link(["queues", q.sourceQueue], q.sourceQueue)],
            ["Sink queue", q.sinkQueue ? link(["queues", q.sinkQueue], q.sinkQueue) : "–"],
            ["Consumer group", h("span", {}, ...q.consumerGroups.map((g) => link(["groups", g], g)))],
            ["Query id", h("code", {}, q.queryId)], ["Config hash", h("code", {}, q.configHash)],
            ["Registered", time(q.createdAt)], ["Last registration", time(q.updatedAt)],
          ])),
          card("State shards", {}, table.el));
      } catch (error) {
        if (error.status === 404) {
          region.show(emptyState(`No streams query ${name}.`, h("p", {}, link(["streams"], "See every streams query"))));
          return;
        }
        region.fail(error, "Could not load the streams query");
      }
    },
  };
}
