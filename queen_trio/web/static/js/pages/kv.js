// KV: the namespaces, a prefix browser over one of them, a row's value, version and expiry.

import { get } from "../api.js";
import { h, link } from "../dom.js";
import { bytes, num, time } from "../format.js";
import { code, payload, Region, Table } from "../ui.js";

const KV_EXAMPLE = `curl -X POST ${location.origin}/api/v1/kv -H 'content-type: application/json' \\
  -d '{"operations":[{"op":"put","ns":"app","key":"greeting","value":"hello","ttlSeconds":3600}]}'`;

export default function kv({ main, query }) {
  const spaces = new Region();
  const rows = new Region();
  const ns = query.ns || "";
  const prefix = h("input", { type: "search", value: query.prefix || "", spellcheck: "false", "aria-label": "Key prefix", dataset: { key: "kv-prefix" } });
  const expires = (iso) => (iso ? h("span", { title: iso }, time(iso)) : h("span", { class: "muted" }, "never"));
  const spaceTable = new Table({
    label: "KV namespaces",
    key: (s) => s.namespace,
    columns: [
      { key: "ns", label: "Namespace", header: true, render: (s) => link(["kv"], s.namespace, { ns: s.namespace }) },
      { key: "rows", label: "Live keys", num: true, render: (s) => num(s.rows) },
      { key: "bytes", label: "Value bytes", num: true, render: (s) => bytes(s.bytes) },
      { key: "next", label: "Next expiry", render: (s) => expires(s.nextExpiry) },
      { key: "last", label: "Last write", render: (s) => h("span", { title: s.lastWrite }, time(s.lastWrite)) },
    ],
  });
  const rowTable = new Table({
    label: "Keys",
    key: (r) => r.key,
    columns: [
      { key: "key", label: "Key", header: true, render: (r) => h("code", {}, r.key) },
      { key: "value", label: "Value", render: (r) => {
        const text = JSON.stringify(r.value);
        return text.length <= 80 ? h("code", {}, text) : payload(r.value, `${text.slice(0, 60)}…`);
      } },
      { key: "version", label: "Version", num: true, render: (r) => num(r.version) },
      { key: "expires", label: "Expires", render: (r) => expires(r.expiresAt) },
      { key: "updated", label: "Updated", render: (r) => h("span", { title: r.updatedAt }, time(r.updatedAt)) },
    ],
  });
  main.append(h("h1", {}, "KV"),
    h("p", { class: "muted" }, "Keys the clients keep with client.kv, tx.once and the lock permits (namespace queen-locks). Only live keys show: an expired key is gone whether or not the sweeper has removed it yet."),
    spaces.el);
  if (ns) {
    main.append(h("h2", {}, `Namespace ${ns}`),
      h("form", { class: "filters", role: "search", onsubmit: (e) => {
        e.preventDefault();
        const params = new URLSearchParams({ ns, ...(prefix.value ? { prefix: prefix.value } : {}) });
        history.replaceState(null, "", `#/kv?${params}`);
        load();
      } }, h("label", {}, "Key prefix", prefix), h("button", { type: "submit", class: "primary" }, "Browse")),
      rows.el);
  }

  async function load() {
    try {
      const reply = await get("/api/v1/resources/kv");
      spaceTable.empty = ["No keys yet. A put from anywhere:", code(KV_EXAMPLE)];
      spaceTable.update(reply.namespaces);
      spaces.show(spaceTable.el);
    } catch (error) {
      spaces.fail(error, "Could not load the KV namespaces");
    }
    if (!ns) return;
    try {
      const page = await get(`/api/v1/resources/kv/${encodeURIComponent(ns)}`, { prefix: prefix.value, limit: 200 });
      rowTable.empty = "No live key here with that prefix.";
      rowTable.update(page.rows);
      rows.show(h("p", { class: "muted" }, `${num(page.rows.length)} key${page.rows.length === 1 ? "" : "s"}${page.truncated ? " (the first 200)" : ""}`), rowTable.el);
    } catch (error) {
      rows.fail(error, "Could not load the keys");
    }
  }

  return { title: ns ? `KV ${ns}` : "KV", refresh: load };
}
