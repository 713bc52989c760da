// The pieces every page is made of: cards, figures, tables that keep their sort and focus
// through a live refresh, error and empty states, badges, confirmations and toasts.

import { append, h, replace } from "./dom.js";
import { ago, duration, json, num, time } from "./format.js";
import { needs, session } from "./session.js";

let cards = 0;

// What an empty broker's pages suggest.
export const PUSH_EXAMPLE = `curl -X POST ${location.origin}/api/v1/push -H 'content-type: application/json' \\
  -d '{"items":[{"queue":"orders","payload":{"orderId":1}}]}'`;

export function card(title, { actions, id = `card-${++cards}`, subtitle } = {}, ...body) {
  const heading = h("div", { class: "card-head" }, h("h2", { id }, title),
    subtitle ? h("span", { class: "muted" }, subtitle) : null,
    actions ? h("div", { class: "actions" }, actions) : null);
  return h("section", { class: "card", "aria-labelledby": id }, heading, ...body);
}

export function tiles(items) {
  return h("dl", { class: "tiles" }, items.map(({ label, value, hint, tone, key }) =>
    h("div", { class: `tile ${tone || ""}`, dataset: key ? { tile: key } : undefined },
      h("dt", {}, label), h("dd", {}, value), hint ? h("div", { class: "hint" }, hint) : null)));
}

// A queue's (or a partition's) message counters as every page shows them. They add up:
// total = pending + processing + consumed, each where the slowest consumer group stands
// (a message is consumed once that group acked or dead-lettered it); the dead letters are
// every group's, so they stand apart from the sum.
export const consumed = (m) => m.total - m.pending - m.processing;
export const FIGURES_NOTE = "Total = pending + processing + consumed, counted where the slowest consumer group stands; dead letters are every group's.";

export function figureTiles(m) {
  return [
    { key: "total", label: "Total", value: num(m.total), hint: "= pending + processing + consumed" },
    { key: "pending", label: "Pending", value: num(m.pending), hint: "not delivered yet" },
    { key: "processing", label: "Processing", value: num(m.processing), hint: "delivered, not acked yet" },
    { key: "consumed", label: "Consumed", value: num(consumed(m)), hint: "acked or dead-lettered" },
    { key: "deadLetter", label: "Dead letters", value: num(m.deadLetter), tone: m.deadLetter ? "warn" : "", hint: "every group's" },
  ];
}

// The same counters as table columns; `of` gives a row's counters.
export function figureColumns(of) {
  return [
    { key: "pending", label: "Pending", num: true, value: (r) => of(r).pending, render: (r) => num(of(r).pending) },
    { key: "processing", label: "Processing", num: true, value: (r) => of(r).processing, render: (r) => num(of(r).processing) },
    { key: "consumed", label: "Consumed", num: true, value: (r) => consumed(of(r)), render: (r) => num(consumed(of(r))) },
    { key: "total", label: "Total", num: true, value: (r) => of(r).total, render: (r) => num(of(r).total) },
    { key: "dlq", label: "Dead letters", num: true, value: (r) => of(r).deadLetter, render: (r) => num(of(r).deadLetter) },
  ];
}

// A consumer group's cursor on each partition of a queue, one row a partition (the group and
// queue pages). The group page adds `detailed`: the oldest unconsumed message and the retries.
// `seek` gives a row's seek button.
export function cursorColumns(seek, { detailed = false } = {}) {
  return [
    { key: "partition", label: "Partition", header: true, render: (r) => r.partition },
    { key: "consumed", label: "Consumed", num: true, render: (r) => num(r.totalConsumed) },
    { key: "left", label: "Left", num: true, render: (r) => num(r.offsetLag) },
    { key: "lag", label: "Time lag", num: true, render: (r) => duration(r.timeLagSeconds) },
    detailed && { key: "oldest", label: "Oldest unconsumed", render: (r) => (r.oldestUnconsumedAt ? time(r.oldestUnconsumedAt) : "–") },
    { key: "last", label: "Last consumed", render: (r) => ago(r.lastConsumedAt) },
    { key: "lease", label: "Lease", render: (r) => (r.leaseActive ? `until ${time(r.leaseExpiresAt)}` : "–") },
    { key: "processing", label: "In flight", num: true, render: (r) => num(r.processing) },
    { key: "dlq", label: "Dead letters", num: true, render: (r) => num(r.deadLetters) },
    detailed && { key: "retries", label: "Retries", num: true, render: (r) => num(r.retryCount) },
    { key: "seek", label: "", render: seek },
  ].filter(Boolean);
}

// "encryption disabled: bad key" (or "no key"), from /health's encryption; null when on.
export function encryptionOff(encryption) {
  if (!encryption || encryption.enabled) return null;
  return `encryption disabled: ${String(encryption.reason || "").split(":")[0] || "no key"}`;
}

export function definitions(pairs) {
  return h("dl", { class: "definitions" }, pairs.map(([term, value]) =>
    [h("dt", {}, term), h("dd", {}, value)]));
}

export function badge(text, tone) {
  return h("span", { class: `badge ${tone || text.toLowerCase().replace(/[^a-z]+/g, "-")}` }, text);
}

export function code(text) {
  return h("pre", { class: "code" }, h("code", {}, text));
}

export function payload(value, summary = "Payload") {
  return h("details", { class: "payload" }, h("summary", {}, summary), code(json(value)));
}

// What went wrong, where it went wrong.
export function errorText(error) {
  if (!error || error.status === undefined) return String(error && error.message || error);
  if (error.status === 0) return `The broker did not answer: ${error.message}`;
  if (error.status === 401) return `Not signed in: ${error.message}. Enter a token to continue.`;
  if (error.status === 403) {
    return `Not allowed for your token (level ${session.level || "none"}): ${error.message}`;
  }
  return `${error.status}: ${error.message}`;
}

export function errorBox(error, what) {
  return h("div", { class: "error", role: "alert" }, what ? `${what}: ` : "", errorText(error));
}

export function emptyState(text, ...more) {
  return h("div", { class: "empty" }, h("p", {}, text), ...more);
}

export function notAllowed(what) {
  return emptyState(`Your token (level ${session.level || "none"}) may not read this page: it needs ${needs(what)}.`);
}

// A region of a page that a refresh fills: the last good content stays on screen with the
// error above it when a refresh fails.
export class Region {
  constructor(props) {
    this.el = h("div", { class: "region", ...props });
    this.errorEl = h("div", { class: "region-error" });
    this.body = h("div", { class: "region-body" });
    append(this.el, [this.errorEl, this.body]);
  }

  show(...nodes) {
    replace(this.errorEl);
    replace(this.body, ...nodes);
  }

  fail(error, what) {
    replace(this.errorEl, errorBox(error, what));
  }
}

// A table whose header (and sort) survives refreshes; only the rows are rebuilt.
export class Table {
  constructor({ columns, key, empty, label, sort, descending = true, pageSize = Infinity }) {
    this.columns = columns;
    // Long lists show their first rows (after sorting), and more on request: a thousand rows
    // cost the browser more than the broker.
    this.pageSize = pageSize;
    this.shown = pageSize;
    this.key = key;
    this.empty = empty;
    this.sort = sort || null;
    this.descending = descending;
    this.rows = [];
    this.head = h("tr");
    this.tbody = h("tbody");
    this.table = h("table", { "aria-label": label }, h("thead", {}, this.head), this.tbody);
    this.wrap = h("div", { class: "table-wrap" }, this.table);
    this.emptyEl = h("div");
    this.moreEl = h("div", { class: "more" });
    this.el = h("div", { class: "table-region" }, this.wrap, this.moreEl, this.emptyEl);
    this.renderHead();
  }

  renderHead() {
    replace(this.head, this.columns.map((col) => {
      const sorted = this.sort === col.key;
      const props = { scope: "col", class: col.num ? "num" : "" };
      if (!col.value) return h("th", props, col.label);
      props["aria-sort"] = sorted ? (this.descending ? "descending" : "ascending") : "none";
      return h("th", props, h("button", {
        type: "button", class: "sort", dataset: { key: `sort-${col.key}` },
        onclick: () => {
          if (this.sort === col.key) this.descending = !this.descending;
          else [this.sort, this.descending] = [col.key, col.num !== false && !!col.num];
          this.renderHead();
          this.renderBody();
        },
      }, col.label, h("span", { class: "arrow", "aria-hidden": "true" },
        sorted ? (this.descending ? " ▼" : " ▲") : "")));
    }));
  }

  update(rows) {
    this.rows = rows;
    this.renderBody();
  }

  renderBody() {
    const col = this.columns.find((c) => c.key === this.sort);
    let rows = this.rows;
    if (col && col.value) {
      const dir = this.descending ? -1 : 1;
      rows = [...rows].sort((a, b) => {
        const [x, y] = [col.value(a), col.value(b)];
        if (x === y) return 0;
        if (x === null || x === undefined) return 1;
        if (y === null || y === undefined) return -1;
        return (x < y ? -1 : 1) * dir;
      });
    }
    this.wrap.hidden = rows.length === 0;
    replace(this.emptyEl, rows.length === 0 && this.empty ? emptyState(...[].concat(this.empty)) : null);
    const total = rows.length;
    rows = rows.slice(0, this.shown);
    replace(this.moreEl, total > rows.length ? [
      h("span", { class: "muted" }, `Showing ${rows.length} of ${total}. `),
      h("button", { type: "button", class: "small", dataset: { key: "show-more" }, onclick: () => {
        this.shown += this.pageSize;
        this.renderBody();
      } }, `Show ${Math.min(this.pageSize, total - rows.length)} more`)] : null);
    replace(this.tbody, rows.map((row) => h("tr", { dataset: { row: this.key(row) } },
      this.columns.map((c) => h(c.header ? "th" : "td", { class: c.num ? "num" : "", scope: c.header ? "row" : null },
        c.render ? c.render(row) : c.value(row))))));
  }
}

// -- dialogs -----------------------------------------------------------------------------------

let dialogs = 0;

// A modal dialog; resolves with what `submit` returns, or null when cancelled.
export function dialog({ title, body, submitLabel = "OK", danger = false, submit, wide = false }) {
  return new Promise((resolve) => {
    const id = `dialog-title-${++dialogs}`;
    const errorEl = h("div", { class: "dialog-error" });
    const submitButton = h("button", { type: "submit", class: danger ? "danger" : "primary" }, submitLabel);
    const form = h("form", { method: "dialog" },
      h("h2", { id }, title), h("div", { class: "dialog-body" }, body), errorEl,
      h("div", { class: "dialog-actions" },
        h("button", { type: "button", class: "cancel", onclick: () => close(null) }, "Cancel"), submitButton));
    const el = h("dialog", { "aria-labelledby": id, class: wide ? "wide" : "" }, form);
    let done = false;
    const close = (value) => {
      if (done) return;
      done = true;
      el.close();
      el.remove();
      resolve(value);
    };
    el.addEventListener("cancel", (event) => {
      event.preventDefault();
      close(null);
    });
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      submitButton.disabled = true;
      replace(errorEl);
      try {
        const value = submit ? await submit(form) : true;
        if (value !== undefined) close(value);
      } catch (error) {
        replace(errorEl, errorBox(error));
      } finally {
        submitButton.disabled = false;
      }
    });
    document.body.append(el);
    el.showModal();
  });
}

// Ask before a destructive action; `lines` name what it changes. Resolves with the action's
// result, or null when cancelled; a failure is shown in the dialog, which stays open.
export function confirmAction({ title, lines, action, confirmLabel, typed }) {
  const body = [...lines.map((line) => h("p", {}, line))];
  let input;
  if (typed) {
    input = h("input", { type: "text", autocomplete: "off", spellcheck: "false", required: true,
                          "aria-describedby": "typed-hint" });
    body.push(h("label", {}, h("span", { id: "typed-hint" }, `Type ${typed} to confirm`), input));
  }
  return dialog({
    title, body, submitLabel: confirmLabel, danger: true,
    submit: async () => {
      if (typed && input.value !== typed) throw new Error(`Type ${typed} exactly to confirm.`);
      return (await action()) ?? true;
    },
  });
}

export function toast(text, tone = "ok") {
  const host = document.getElementById("toasts");
  const el = h("div", { class: `toast ${tone}`, role: tone === "error" ? "alert" : "status" }, text);
  host.append(el);
  setTimeout(() => el.remove(), 6000);
}

// A button shown only when the session may take the action.
// `label` names what it acts on, for a screen reader and as a tooltip.
export function actionButton(text, onclick, { danger = false, dataset, label } = {}) {
  return h("button", { type: "button", class: danger ? "danger small" : "small", onclick, dataset,
                       "aria-label": label, title: label }, text);
}
