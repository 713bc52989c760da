// Locks: every live permit of a lock or semaphore, its holder, fencing token and expiry.

import { get } from "../api.js";
import { h } from "../dom.js";
import { num, time } from "../format.js";
import { Region, Table } from "../ui.js";

export default function locks({ main }) {
  const region = new Region();
  const table = new Table({
    label: "Lock permits",
    key: (l) => `${l.name}#${l.slot}`,
    columns: [
      { key: "name", label: "Lock", header: true, render: (l) => h("code", {}, l.name) },
      { key: "slot", label: "Slot", num: true, render: (l) => num(l.slot) },
      { key: "owner", label: "Holder", render: (l) => l.owner || h("span", { class: "muted" }, "(no owner)") },
      { key: "token", label: "Token", num: true, render: (l) => num(l.token) },
      { key: "since", label: "Held since", render: (l) => h("span", { title: l.since }, time(l.since)) },
      { key: "renewed", label: "Renewed", render: (l) => h("span", { title: l.renewedAt }, time(l.renewedAt)) },
      { key: "expires", label: "Expires", render: (l) => h("span", { title: l.expiresAt }, time(l.expiresAt)) },
    ],
  });
  main.append(h("h1", {}, "Locks"),
    h("p", { class: "muted" }, "Locks and semaphores held through client.lock() and client.semaphore(). A permit is a lease: it expires unless its holder renews it, and the token rises at every renew; a transaction guarded by an older token commits nothing."),
    region.el);
  return {
    title: "Locks",
    refresh: async () => {
      try {
        const reply = await get("/api/v1/resources/locks");
        table.empty = "No lock is held right now.";
        table.update(reply.locks);
        region.show(h("p", { class: "muted" }, `${num(reply.locks.length)} permit${reply.locks.length === 1 ? "" : "s"} held`), table.el);
      } catch (error) {
        region.fail(error, "Could not load the locks");
      }
    },
  };
}
