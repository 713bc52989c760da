// What this browser tab knows about itself: the token's level (from whoami), what that level
// may do, and the viewer's settings (refresh interval, pause, range, theme).

const SETTINGS_KEY = "queen-trio.settings";
const DEFAULTS = { interval: 2, paused: false, range: "1h", theme: "auto" };

export const RANGES = { "1h": 3600, "6h": 6 * 3600, "24h": 24 * 3600 };

export const session = {
  level: null,
  sub: null,
  role: null,
  authRequired: false,
  settings: { ...DEFAULTS, ...readSettings() },
};

function readSettings() {
  try {
    return JSON.parse(localStorage.getItem(SETTINGS_KEY)) || {};
  } catch {
    return {};
  }
}

export function saveSettings(changes) {
  Object.assign(session.settings, changes);
  localStorage.setItem(SETTINGS_KEY, JSON.stringify(session.settings));
}

// Levels and what each may do (docs/self-hosting.md, access levels).
const GRANTS = {
  "write-only": ["push"],
  "read-only": ["read"],
  "read-write": ["push", "read", "write"],
  admin: ["push", "read", "write", "admin"],
};

export function can(what) {
  return (GRANTS[session.level] || []).includes(what);
}

export function needs(what) {
  return { push: "write-only, read-write or admin", read: "read-only, read-write or admin",
           write: "read-write or admin", admin: "admin" }[what];
}

// The range the header picks, as the API's from/to.
export function rangeQuery(range = session.settings.range) {
  const to = new Date();
  const from = new Date(to.getTime() - (RANGES[range] || 3600) * 1000);
  return { from: from.toISOString(), to: to.toISOString() };
}
