// The shell: hash routes, the token and its level, the live refresh loop, the header's
// search, push and pop. Each page is a module of its own in pages/, loaded when visited.

import { ApiError, get, setToken, token } from "./api.js";
import { h, replace } from "./dom.js";
import { time } from "./format.js";
import { live } from "./live.js";
import { openPop, openPush } from "./forms.js";
import { startSearch } from "./search.js";
import { can, saveSettings, session } from "./session.js";
import { dialog, emptyState, errorBox } from "./ui.js";

const ROUTES = [
  [[], "overview"],
  [["queues"], "queues"],
  [["queues", ":queue"], "queue"],
  [["groups"], "groups"],
  [["groups", ":group"], "group"],
  [["streams"], "streams"],
  [["streams", ":name"], "stream"],
  [["messages"], "messages"],
  [["messages", ":partitionId", ":transactionId"], "message"],
  [["dlq"], "dlq"],
  [["traces"], "traces"],
  [["traces", "message", ":partitionId", ":transactionId"], "trace"],
  [["traces", ":name"], "trace"],
  [["timers"], "timers"],
  [["timers", ":queue"], "timers"],
  [["ephemeral"], "ephemeral"],
  [["analytics"], "analytics"],
  [["system"], "system"],
  [["kv"], "kv"],
  [["locks"], "locks"],
  [["consumers"], "consumers"],
];
// The sidebar entry each page belongs to.
const NAV = { queue: "queues", group: "groups", stream: "streams", message: "messages", trace: "traces" };

const main = document.getElementById("main");
let current = null;
let currentRoute = null;
let generation = 0;
let timer = null;

function resolve() {
  const raw = location.hash.replace(/^#\/?/, "");
  const [pathPart, queryPart = ""] = raw.split("?");
  let segments;
  try {
    segments = pathPart ? pathPart.split("/").map((s) => decodeURIComponent(s)) : [];
  } catch {
    // A malformed escape (#/queues/%, invalid UTF-8): no page lives there.
    return { page: null, params: {}, query: {} };
  }
  const query = Object.fromEntries(new URLSearchParams(queryPart));
  for (const [pattern, page] of ROUTES) {
    if (pattern.length !== segments.length) continue;
    const params = {};
    if (pattern.every((part, i) => (part.startsWith(":") ? (params[part.slice(1)] = segments[i], true)
                                                          : part === segments[i]))) {
      return { page, params, query };
    }
  }
  return { page: null, params: {}, query };
}

async function navigate() {
  const gen = ++generation;
  clearTimeout(timer);
  if (current && current.destroy) current.destroy();
  current = null;
  delete main.dataset.loaded;
  const route = resolve();
  currentRoute = route;
  for (const a of document.querySelectorAll("#nav a")) {
    if (a.dataset.page === (NAV[route.page] || route.page)) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  }
  document.getElementById("nav").classList.remove("open");
  document.getElementById("menu").setAttribute("aria-expanded", "false");
  if (!route.page) {
    replace(main, h("h1", {}, "Page not found"),
      emptyState(`Nothing lives at ${location.hash}.`, h("p", {}, h("a", { href: "#/" }, "Go to the overview"))));
    main.dataset.loaded = "not-found";
    return;
  }
  if (!can("read")) {
    replace(main, h("h1", {}, "Push only"), emptyState(
      `Your token's level (${session.level || "none"}) may push messages but read nothing: use the Push button above.`));
    main.dataset.loaded = route.page;
    return;
  }
  let module;
  try {
    module = await import(`./pages/${route.page}.js`);
  } catch (error) {
    replace(main, errorBox(error, "This page could not be loaded"));
    return;
  }
  if (gen !== generation) return;
  replace(main);
  current = module.default({ main, params: route.params, query: route.query });
  document.title = `${current.title} · queen-trio`;
  await refresh(gen);
}

async function refresh(gen) {
  if (!current || gen !== generation) return;
  clearTimeout(timer);
  try {
    await current.refresh();
  } catch (error) {
    main.prepend(errorBox(error, "This page failed"));
  }
  if (gen !== generation) return;
  if (!main.dataset.loaded) {
    // The page's first data is on screen: bench/dashboard_load.py measures up to this mark.
    performance.mark("queen:loaded", { detail: currentRoute.page });
    main.dataset.loaded = currentRoute.page;
  }
  replace(document.getElementById("live-state"),
    session.settings.paused ? "Paused" : `Live, every ${session.settings.interval} s · updated ${time(new Date().toISOString())}`);
  schedule(gen);
}

function schedule(gen) {
  clearTimeout(timer);
  if (session.settings.paused) return;
  timer = setTimeout(() => {
    if (document.hidden) schedule(gen);
    else refresh(gen);
  }, session.settings.interval * 1000);
}

live.refreshNow = () => refresh(generation);

// -- the token ---------------------------------------------------------------------------------

let asking = null;

function askToken(reason) {
  if (asking) return asking;
  const input = h("textarea", { rows: 4, required: true, spellcheck: "false", autocomplete: "off",
                                 "aria-describedby": "token-help" });
  asking = dialog({
    title: "This broker asks for a token",
    body: [
      h("p", { id: "token-help" }, "Authentication is on. Paste a JWT: it is kept in this tab's sessionStorage until you sign out or close the tab."),
      reason ? errorBox(reason) : null,
      h("label", {}, "Token", input),
    ],
    submitLabel: "Sign in",
    submit: async () => {
      setToken(input.value.trim());
      const who = await get("/api/v1/auth/whoami");
      return who;
    },
  }).then((who) => {
    asking = null;
    if (!who) setToken("");
    return who;
  });
  return asking;
}

async function identify() {
  for (;;) {
    try {
      const who = await get("/api/v1/auth/whoami");
      Object.assign(session, { level: who.level, sub: who.sub, role: who.role, authRequired: !!token() });
      return true;
    } catch (error) {
      if (!(error instanceof ApiError) || error.status !== 401) {
        replace(main, h("h1", {}, "queen-trio"), errorBox(error, "Could not ask the broker who you are"),
          h("button", { type: "button", onclick: () => start() }, "Try again"));
        main.dataset.loaded = "error";
        return false;
      }
      const who = await askToken(error);
      if (!who) {
        replace(main, h("h1", {}, "Signed out"), emptyState("This broker needs a token to show anything.",
          h("button", { type: "button", class: "primary", onclick: () => start() }, "Sign in")));
        main.dataset.loaded = "signed-out";
        return false;
      }
    }
  }
}

function showIdentity() {
  const who = document.getElementById("who");
  replace(who, session.level ? `${session.level}${session.sub ? ` · ${session.sub}` : ""}` : "");
  who.title = session.authRequired ? `Signed in as ${session.sub || "?"} (role ${session.role || "none"})`
                                   : "Authentication is off: every action is allowed";
  document.getElementById("sign-out").hidden = !token();
  document.getElementById("push-open").hidden = !can("push");
  document.getElementById("pop-open").hidden = !can("write");
  document.getElementById("search-box").hidden = !can("read");
}

window.addEventListener("queen:unauthorized", async (event) => {
  if (!session.level) return; // identify() handles the first one
  const who = await askToken(event.detail);
  if (who) {
    Object.assign(session, { level: who.level, sub: who.sub, role: who.role, authRequired: true });
    showIdentity();
    navigate();
  }
});

// -- header controls ---------------------------------------------------------------------------

function applyTheme() {
  const theme = session.settings.theme;
  if (theme === "auto") delete document.documentElement.dataset.theme;
  else document.documentElement.dataset.theme = theme;
  document.getElementById("theme").textContent = `Theme: ${theme}`;
  window.dispatchEvent(new Event("queen:theme"));
}

function setupHeader() {
  const range = document.getElementById("range");
  range.value = session.settings.range;
  range.addEventListener("change", () => {
    saveSettings({ range: range.value });
    live.refreshNow();
  });
  const interval = document.getElementById("interval");
  interval.value = session.settings.interval;
  interval.addEventListener("change", () => {
    const seconds = Math.min(60, Math.max(1, Math.round(Number(interval.value)) || 2));
    interval.value = seconds;
    saveSettings({ interval: seconds });
    live.refreshNow();
  });
  const pause = document.getElementById("pause");
  const showPause = () => {
    pause.setAttribute("aria-pressed", String(session.settings.paused));
    pause.textContent = session.settings.paused ? "Resume" : "Pause";
  };
  showPause();
  pause.addEventListener("click", () => {
    saveSettings({ paused: !session.settings.paused });
    showPause();
    live.refreshNow();
  });
  document.getElementById("theme").addEventListener("click", () => {
    const order = ["auto", "light", "dark"];
    saveSettings({ theme: order[(order.indexOf(session.settings.theme) + 1) % order.length] });
    applyTheme();
  });
  document.getElementById("sign-out").addEventListener("click", () => {
    setToken("");
    location.reload();
  });
  const menu = document.getElementById("menu");
  menu.addEventListener("click", () => {
    const open = document.getElementById("nav").classList.toggle("open");
    menu.setAttribute("aria-expanded", String(open));
  });
  document.getElementById("skip").addEventListener("click", () => main.focus());
  document.getElementById("push-open").addEventListener("click", () => openPush(currentRoute?.params.queue));
  document.getElementById("pop-open").addEventListener("click", () => openPop(currentRoute?.params.queue));
  startSearch();
}

async function start() {
  // Fetch the page's module while whoami is asked (navigate() imports it from the cache).
  const first = resolve().page;
  if (first) import(`./pages/${first}.js`).catch(() => {});
  if (!(await identify())) return;
  showIdentity();
  navigate();
}

applyTheme();
setupHeader();
window.addEventListener("hashchange", navigate);
start();
