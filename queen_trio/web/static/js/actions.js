// The destructive actions, each behind a confirmation that names what it changes: seek,
// consumer-group delete, message delete and retry, queue delete, timer cancel.

import { del, path, post } from "./api.js";
import { h } from "./dom.js";
import { fromLocalInput, num, toLocalInput } from "./format.js";
import { live } from "./live.js";
import { can } from "./session.js";
import { actionButton, confirmAction, dialog, toast } from "./ui.js";

function done(text) {
  toast(text);
  live.refreshNow();
}

export function seekButton(target, label = "Seek…") {
  if (!can("write")) return null;
  return actionButton(label, () => seek(target), {
    label: `Seek ${target.group} on ${target.queue}${target.partition ? `/${target.partition}` : ""}`, dataset: { action: "seek", key: `seek-${target.group}-${target.queue}-${target.partition || ""}` } });
}

// Move a group's cursor on a queue (or one partition): to the end, or to a time.
export function seek({ group, queue, partition }) {
  const toEnd = h("input", { type: "radio", name: "seek-to", value: "end", checked: true });
  const toTime = h("input", { type: "radio", name: "seek-to", value: "time" });
  const at = h("input", { type: "datetime-local", step: 1, value: toLocalInput(new Date(Date.now() - 3600e3).toISOString()),
                          "aria-label": "Seek to this time (local)" });
  const where = partition ? `partition ${partition} of queue ${queue}` : `every partition of queue ${queue} where it has state`;
  return dialog({
    title: `Seek ${group}`,
    submitLabel: "Seek",
    danger: true,
    body: [
      h("p", {}, `Moves the cursor of consumer group ${group} on ${where}. Its leases there are released (acks under them are refused) and its retry counters reset.`),
      h("fieldset", {}, h("legend", {}, "Where to"),
        h("label", { class: "check" }, toEnd, h("span", {}, "To the end: skip everything pending")),
        h("label", { class: "check" }, toTime, h("span", {}, "To a time: replay what was pushed after it")),
        h("label", {}, h("span", {}, "Time"), at)),
    ],
    submit: async () => {
      const body = toEnd.checked ? { toEnd: true } : { timestamp: fromLocalInput(at.value) };
      if (!toEnd.checked && !at.value) throw new Error("Pick a time to seek to.");
      const route = partition
        ? path("/api/v1/consumer-groups", group, "queues", queue, "partitions", partition, "seek")
        : path("/api/v1/consumer-groups", group, "queues", queue, "seek");
      const reply = await post(route, body);
      done(partition ? `Seek done: ${group} on ${queue}/${partition}`
                     : `Seek done: ${num(reply.partitionsUpdated)} partition(s) of ${queue} moved for ${group}`);
      return reply;
    },
  });
}

export function deleteGroupButton(group, queue) {
  if (!can("admin")) return null;
  return actionButton(queue ? "Remove…" : "Delete group…", () => deleteGroup(group, queue),
    { danger: true, label: queue ? `Remove ${group} from ${queue}` : `Delete consumer group ${group}`,
      dataset: { action: "delete-group", key: `delete-${group}-${queue || ""}` } });
}

export function deleteGroup(group, queue) {
  const remove = h("input", { type: "checkbox", checked: true });
  return dialog({
    title: queue ? `Remove ${group} from ${queue}` : `Delete consumer group ${group}`,
    submitLabel: queue ? "Remove from queue" : "Delete group",
    danger: true,
    body: [
      h("p", {}, queue
        ? `Deletes the cursors and leases of consumer group ${group} on queue ${queue}. Its dead letters stay.`
        : `Deletes every cursor, lease and subscription of consumer group ${group}, on every queue. Its dead letters stay.`),
      h("label", { class: "check" }, remove, h("span", {}, "Also forget its subscription start (its next pop joins afresh)")),
    ],
    submit: async () => {
      const query = { deleteMetadata: remove.checked ? "true" : "false" };
      const reply = queue
        ? await del(path("/api/v1/consumer-groups", group, "queues", queue), query)
        : await del(path("/api/v1/consumer-groups", group), query);
      done(`Deleted ${group}${queue ? ` from ${queue}` : ""}: ${num(reply.deletedPartitions)} partition cursor(s)`);
      return reply;
    },
  });
}

export function deleteMessageButton(m) {
  if (!can("write")) return null;
  return actionButton("Delete…", () => deleteMessage(m), { danger: true, dataset: { action: "delete-message", key: `delete-${m.partitionId}-${m.transactionId}` } });
}

// `then` runs once it is deleted (the message page leaves for the list); else the page refreshes.
export function deleteMessage({ partitionId, transactionId, queue, partition }, then) {
  return confirmAction({
    title: "Delete this message",
    confirmLabel: "Delete message",
    lines: [`Hides message ${transactionId} of ${queue}/${partition} from every consumer group and every count, and removes its dead letters. This cannot be undone.`],
    action: async () => {
      const reply = await del(path("/api/v1/messages", partitionId, transactionId));
      if (then) {
        toast(`Deleted message ${transactionId}`);
        then();
      } else {
        done(`Deleted message ${transactionId}`);
      }
      return reply;
    },
  });
}

export function retryButton(m, group) {
  if (!can("write")) return null;
  return actionButton(group ? `Retry for ${group}` : "Retry", () => retry(m, group),
    { dataset: { action: "retry", key: `retry-${m.partitionId}-${m.transactionId}-${group || ""}` } });
}

export function retry({ partitionId, transactionId, queue, partition }, group) {
  return confirmAction({
    title: "Retry this dead letter",
    confirmLabel: "Retry",
    lines: [`Delivers dead letter ${transactionId} of ${queue}/${partition} again to ${group ? `consumer group ${group}` : "every group whose dead letters hold it"}, first on the partition; acking it then removes it from the dead letters.`],
    action: async () => {
      const reply = await post(path("/api/v1/messages", partitionId, transactionId, "retry"), undefined,
        group ? { consumerGroup: group } : undefined);
      done(`Retried ${transactionId} for ${reply.consumerGroups.join(", ")}`);
      return reply;
    },
  });
}

export function deleteQueueButton(queue, totals) {
  if (!can("admin")) return null;
  return actionButton("Delete queue…", () => deleteQueue(queue, totals), { danger: true, dataset: { action: "delete-queue" } });
}

export function deleteQueue(queue, totals) {
  return confirmAction({
    title: `Delete queue ${queue}`,
    confirmLabel: "Delete queue",
    typed: queue,
    lines: [`Deletes queue ${queue} with its partitions, its ${num(totals ? totals.total : 0)} messages, its consumer groups' cursors and its dead letters. This cannot be undone.`],
    action: async () => {
      const reply = await del(path("/api/v1/resources/queues", queue));
      toast(`Deleted queue ${queue}`);
      location.hash = "#/queues";
      return reply;
    },
  });
}

export function cancelTimerButton(t) {
  if (!can("write")) return null;
  return actionButton("Cancel…", () => cancelTimer(t), { danger: true, dataset: { action: "cancel-timer", key: `cancel-${t.queue}-${t.timerKey}` } });
}

export function cancelTimer({ queue, timerKey, txn }) {
  return confirmAction({
    title: "Cancel this timer",
    confirmLabel: "Cancel timer",
    lines: [`Cancels timer ${timerKey} of ${queue}: its message (txn ${txn}) is never delivered. A timer a broker is firing right now is too late to cancel.`],
    action: async () => {
      const reply = await del(path("/api/v1/timers", queue, timerKey), { txn });
      done(reply.status === "cancelled" ? `Cancelled timer ${timerKey}`
        : reply.status === "too_late" ? `Too late: timer ${timerKey} is being delivered`
          : `Timer ${timerKey} is no longer pending (absent)`);
      return reply;
    },
  });
}
