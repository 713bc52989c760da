// Streams: the queries of the streaming SDK, each with its source, sink, lag, state and last
// cycle (GET /streams/v1/queries).

import { get } from "../api.js";
import { h, link } from "../dom.js";
import { ago, bytes, num } from "../format.js";
import { Region, Table } from "../ui.js";

export default function streams({ main }) {
  const region = new Region();
  const table = new Table({
    label: "Streams queries",
    key: (q) => q.queryId,
    sort: "name",
    columns: [
      { key: "name", label: "Query", header: true, value: (q) => q.name, render: (q) => link(["streams", q.name], q.name) },
      { key: "source", label: "Source", value: (q) => q.sourceQueue, render: (q) => link(["queues", q.sourceQueue], q.sourceQueue) },
      { key: "sink", label: "Sink", value: (q) => q.sinkQueue || "", render: (q) => (q.sinkQueue ? link(["queues", q.sinkQueue], q.sinkQueue) : "–") },
      { key: "group", label: "Consumer group", value: (q) => q.consumerGroups.join(", "),
        render: (q) => h("span", {}, ...q.consumerGroups.map((g) => link(["groups", g], g))) },
      { key: "lag", label: "Lag", num: true, value: (q) => q.lag, render: (q) => num(q.lag) },
      { key: "shards", label: "State shards", num: true, value: (q) => q.shards, render: (q) => num(q.shards) },
      { key: "rows", label: "State rows", num: true, value: (q) => q.stateRows, render: (q) => num(q.stateRows) },
      { key: "bytes", label: "State size", num: true, value: (q) => q.stateBytes, render: (q) => bytes(q.stateBytes) },
      { key: "last", label: "Last cycle", value: (q) => q.lastCycleAt || "", render: (q) => ago(q.lastCycleAt) },
    ],
  });
  table.empty = "No streams queries yet: Stream.from_(queue)...run(query_id=NAME, url=...) registers one.";
  main.append(h("h1", {}, "Streams"),
    h("p", { class: "muted" }, "Queries of the official streaming SDK. Lag: messages of the source queue its consumer group has not consumed. ",
      "State: the rows the SDK keeps per source partition (open windows, the watermark ", h("code", {}, "__wm__"), ", gate buckets)."),
    region.el);
  return {
    title: "Streams",
    refresh: async () => {
      try {
        table.update((await get("/streams/v1/queries")).queries);
        region.show(table.el);
      } catch (error) {
        region.fail(error, "Could not load the streams queries");
      }
    },
  };
}
