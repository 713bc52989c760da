// The header search (Ctrl/Cmd-K): jump to a queue, a consumer group or a trace name.

import { get } from "./api.js";
import { h, href, replace } from "./dom.js";

const LIMIT = 8;
const cache = new Map(); // path -> {at, value}

async function cached(path, query, seconds = 10) {
  const key = path + JSON.stringify(query);
  const hit = cache.get(key);
  if (hit && Date.now() - hit.at < seconds * 1000) return hit.value;
  const value = await get(path, query);
  cache.set(key, { at: Date.now(), value });
  return value;
}

async function lookup(text) {
  const needle = text.toLowerCase();
  const [queues, groups, traces] = await Promise.allSettled([
    get("/api/v1/resources/queues", { search: text, limit: LIMIT }),
    cached("/api/v1/consumer-groups"),
    cached("/api/v1/traces/names", { limit: 1000 }),
  ]);
  const out = [];
  if (queues.status === "fulfilled") {
    for (const q of queues.value.queues) out.push({ kind: "Queue", label: q.name, href: href(["queues", q.name]) });
  }
  if (groups.status === "fulfilled") {
    const names = [...new Set(groups.value.map((g) => g.name))].filter((n) => n.toLowerCase().includes(needle));
    for (const name of names.slice(0, LIMIT)) out.push({ kind: "Group", label: name, href: href(["groups", name]) });
  }
  if (traces.status === "fulfilled") {
    const names = traces.value.trace_names.map((t) => t.trace_name).filter((n) => n.toLowerCase().includes(needle));
    for (const name of names.slice(0, LIMIT)) out.push({ kind: "Trace", label: name, href: href(["traces", name]) });
  }
  return out;
}

export function startSearch() {
  const input = document.getElementById("search");
  const list = document.getElementById("search-results");
  let options = [];
  let active = -1;
  let seq = 0;
  let debounce = null;

  const close = () => {
    list.hidden = true;
    input.setAttribute("aria-expanded", "false");
    input.removeAttribute("aria-activedescendant");
    active = -1;
  };
  const highlight = (index) => {
    active = index;
    [...list.children].forEach((li, i) => li.setAttribute("aria-selected", String(i === index)));
    if (index >= 0 && list.children[index]) input.setAttribute("aria-activedescendant", list.children[index].id);
  };
  const go = (option) => {
    location.hash = option.href;
    input.value = "";
    close();
    input.blur();
  };
  const show = () => {
    replace(list, options.length
      ? options.map((o, i) => h("li", { id: `search-option-${i}`, role: "option", "aria-selected": "false",
                                      onmousedown: (e) => { e.preventDefault(); go(o); } },
        h("span", { class: "kind" }, o.kind), h("span", {}, o.label)))
      : h("li", { class: "none", role: "option", "aria-disabled": "true" }, "No queue, group or trace matches"));
    list.hidden = false;
    input.setAttribute("aria-expanded", "true");
    highlight(options.length ? 0 : -1);
  };

  input.addEventListener("input", () => {
    clearTimeout(debounce);
    const text = input.value.trim();
    if (!text) {
      close();
      return;
    }
    debounce = setTimeout(async () => {
      const mine = ++seq;
      try {
        const found = await lookup(text);
        if (mine !== seq) return;
        options = found;
        show();
      } catch {
        close();
      }
    }, 120);
  });
  input.addEventListener("keydown", (event) => {
    if (event.key === "ArrowDown" && options.length) {
      event.preventDefault();
      highlight((active + 1) % options.length);
    } else if (event.key === "ArrowUp" && options.length) {
      event.preventDefault();
      highlight((active - 1 + options.length) % options.length);
    } else if (event.key === "Enter" && active >= 0 && options[active]) {
      event.preventDefault();
      go(options[active]);
    } else if (event.key === "Escape") {
      close();
    }
  });
  input.addEventListener("blur", () => setTimeout(close, 100));
  document.addEventListener("keydown", (event) => {
    if ((event.ctrlKey || event.metaKey) && event.key.toLowerCase() === "k") {
      event.preventDefault();
      input.focus();
      input.select();
    }
  });
}
