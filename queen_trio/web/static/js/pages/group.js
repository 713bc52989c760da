// One consumer group: its lag on every queue and partition, seek and delete.

import { deleteGroupButton, seekButton } from "../actions.js";
import { get, path } from "../api.js";
import { h, link, replace } from "../dom.js";
import { duration, groupLabel, num } from "../format.js";
import { badge, card, cursorColumns, emptyState, Region, Table } from "../ui.js";

export default function group({ main, params }) {
  const name = params.group;
  const region = new Region();
  const actions = h("div", { class: "actions" }, deleteGroupButton(name));
  main.append(h("div", { class: "page-head" },
    h("div", {}, h("p", { class: "crumbs" }, link(["groups"], "Consumer groups"), " / "), h("h1", {}, groupLabel(name))), actions),
  region.el);

  return {
    title: groupLabel(name),
    refresh: async () => {
      try {
        const [detail, list] = await Promise.all([get(path("/api/v1/consumer-groups", name)), get("/api/v1/consumer-groups")]);
        const summary = new Map(list.filter((g) => g.name === name).map((g) => [g.queueName, g]));
        const queues = Object.entries(detail);
        if (!queues.length) {
          replace(actions);
          region.show(emptyState(`No consumer group ${name}: it appears when a consumer pops with consumerGroup=${name}.`,
            h("p", {}, link(["groups"], "See every consumer group"))));
          return;
        }
        region.show(queues.map(([queue, { partitions }]) => {
          const s = summary.get(queue);
          const table = new Table({
            label: `${groupLabel(name)} on ${queue}`,
            key: (r) => r.partitionId,
            columns: cursorColumns((r) => seekButton({ group: name, queue, partition: r.partition }),
                                   { detailed: true }),
          });
          table.update(partitions);
          return card(queue, {
            subtitle: s ? h("span", {}, badge(s.state), ` ${num(s.totalLag)} left · max lag ${duration(s.maxTimeLag)} · subscription ${s.subscriptionMode} · delivery ${s.conflation ? "conflation (newest per partition)" : "every message"}`) : null,
            actions: [link(["queues", queue], "Queue"), seekButton({ group: name, queue }, "Seek queue…"), deleteGroupButton(name, queue)],
          }, table.el);
        }));
      } catch (error) {
        region.fail(error, "Could not load the consumer group");
      }
    },
  };
}
