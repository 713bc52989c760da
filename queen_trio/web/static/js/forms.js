// The header's Push and Pop forms: a newcomer can try the broker from the page.

import { get, path, post } from "./api.js";
import { h, replace } from "./dom.js";
import { json } from "./format.js";
import { live } from "./live.js";
import { code, dialog, errorBox, toast } from "./ui.js";

function field(label, input, hint) {
  return h("label", {}, h("span", {}, label), input, hint ? h("small", { class: "muted" }, hint) : null);
}

export function openPush(queue = "") {
  const inputs = {
    queue: h("input", { name: "queue", required: true, value: queue, autocomplete: "off", spellcheck: "false" }),
    partition: h("input", { name: "partition", value: "Default", autocomplete: "off", spellcheck: "false" }),
    transactionId: h("input", { name: "transactionId", autocomplete: "off", spellcheck: "false" }),
    payload: h("textarea", { name: "payload", rows: 6, spellcheck: "false", value: '{\n  "hello": "world"\n}' }),
  };
  return dialog({
    title: "Push a message",
    submitLabel: "Push",
    body: [
      field("Queue", inputs.queue, "created on first push"),
      field("Partition", inputs.partition),
      field("Transaction id", inputs.transactionId, "optional: a repeat within the dedup window is a duplicate"),
      field("Payload (JSON)", inputs.payload),
    ],
    submit: async () => {
      let payload;
      try {
        payload = JSON.parse(inputs.payload.value);
      } catch (error) {
        throw new Error(`The payload is not valid JSON: ${error.message}`);
      }
      const item = { queue: inputs.queue.value, partition: inputs.partition.value || "Default", payload };
      if (inputs.transactionId.value) item.transactionId = inputs.transactionId.value;
      const [result] = await post("/api/v1/push", { items: [item] });
      if (result.status === "failed") throw new Error(`Push failed: ${result.error}`);
      toast(`Pushed to ${item.queue}/${item.partition}: ${result.status} (transaction ${result.transaction_id})`);
      live.refreshNow();
      return result;
    },
  });
}

export function openPop(queue = "") {
  const inputs = {
    queue: h("input", { name: "queue", required: true, value: queue, autocomplete: "off", spellcheck: "false" }),
    partition: h("input", { name: "partition", autocomplete: "off", spellcheck: "false" }),
    group: h("input", { name: "consumerGroup", autocomplete: "off", spellcheck: "false" }),
    batch: h("input", { name: "batch", type: "number", min: 1, max: 10000, value: "1" }),
    autoAck: h("input", { name: "autoAck", type: "checkbox" }),
  };
  const results = h("div", { class: "pop-results", "aria-live": "polite" });
  return dialog({
    title: "Pop messages",
    submitLabel: "Pop",
    wide: true,
    body: [
      field("Queue", inputs.queue),
      field("Partition", inputs.partition, "optional: any partition when empty"),
      field("Consumer group", inputs.group, "optional: queue mode when empty"),
      field("Batch", inputs.batch),
      h("label", { class: "check" }, inputs.autoAck, h("span", {}, "Auto-ack (at most once: the cursor moves at once)")),
      results,
    ],
    submit: async () => {
      const route = inputs.partition.value
        ? path("/api/v1/pop/queue", inputs.queue.value, "partition", inputs.partition.value)
        : path("/api/v1/pop/queue", inputs.queue.value);
      const reply = await get(route, { batch: inputs.batch.value, consumerGroup: inputs.group.value,
                                       autoAck: inputs.autoAck.checked ? "true" : "" });
      live.refreshNow();
      if (!reply) {
        replace(results, h("p", { class: "muted" }, "Nothing to deliver (204): the queue has nothing pending for this group."));
        return undefined;
      }
      showPopped(results, reply, inputs.group.value || null, inputs.autoAck.checked);
      return undefined; // stay open: the messages and their ack buttons are here
    },
  });
}

function showPopped(results, reply, group, autoAcked) {
  const settle = async (status) => {
    try {
      const acks = await post("/api/v1/ack/batch", {
        consumerGroup: group,
        acknowledgments: reply.messages.map((m) => ({
          transactionId: m.transactionId, partitionId: m.partitionId, leaseId: m.leaseId, status })),
      });
      const refused = acks.filter((a) => !a.success);
      replace(actions, refused.length
        ? errorBox(new Error(refused.map((a) => a.error).join("; ")), "Some acks were refused")
        : h("p", { class: "ok" }, `Acked ${acks.length} as ${status}.`));
      live.refreshNow();
    } catch (error) {
      replace(actions, errorBox(error, "Ack failed"));
    }
  };
  const actions = h("div", { class: "actions" }, autoAcked ? h("p", { class: "muted" }, "Auto-acked.") : [
    h("button", { type: "button", class: "primary", onclick: () => settle("completed") }, "Ack all (completed)"),
    h("button", { type: "button", onclick: () => settle("failed") }, "Nack all (failed)"),
  ]);
  replace(results,
    h("p", {}, `${reply.messages.length} message(s) from ${reply.queue}/${reply.partition}` +
      (reply.leaseId ? `, lease ${reply.leaseId}` : "")),
    reply.messages.map((m) => h("div", { class: "popped" },
      h("div", { class: "muted" }, `${m.transactionId} · ${m.createdAt}`), code(json(m.data)))),
    actions);
}
