// The public HTTP API, as the dashboard calls it: the token (kept in sessionStorage) goes on
// every request, and a refusal becomes an ApiError whose text says what happened.

const TOKEN_KEY = "queen-trio.token";

export class ApiError extends Error {
  constructor(status, message, path) {
    super(message);
    this.status = status;
    this.path = path;
  }
}

export function token() {
  return sessionStorage.getItem(TOKEN_KEY) || "";
}

export function setToken(value) {
  if (value) sessionStorage.setItem(TOKEN_KEY, value);
  else sessionStorage.removeItem(TOKEN_KEY);
}

export async function call(method, path, { query, body } = {}) {
  const url = new URL(path, location.origin);
  for (const [key, value] of Object.entries(query || {})) {
    if (value !== null && value !== undefined && value !== "") url.searchParams.set(key, value);
  }
  const headers = { accept: "application/json" };
  if (token()) headers.authorization = `Bearer ${token()}`;
  if (body !== undefined) headers["content-type"] = "application/json";
  let response;
  try {
    response = await fetch(url, {
      method, headers, cache: "no-store",
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  } catch (err) {
    throw new ApiError(0, `the broker did not answer (${err.message})`, path);
  }
  if (response.status === 204) return null;
  const text = await response.text();
  let data = null;
  try {
    data = text ? JSON.parse(text) : null;
  } catch {
    data = null;
  }
  if (!response.ok) {
    const message = (data && typeof data.error === "string" && data.error) || text || response.statusText;
    const error = new ApiError(response.status, message, path);
    if (response.status === 401) window.dispatchEvent(new CustomEvent("queen:unauthorized", { detail: error }));
    throw error;
  }
  return data;
}

export const get = (path, query) => call("GET", path, { query });
export const post = (path, body, query) => call("POST", path, { body: body ?? {}, query });
export const del = (path, query) => call("DELETE", path, { query });

// Path segments of a route, each percent-encoded (names may hold "/", "?" or "#"). A segment
// encodeURIComponent refuses (a lone surrogate) is an ApiError the page shows, not a crash.
export function path(...segments) {
  return segments.map((s, i) => {
    if (i === 0) return s;
    try {
      return encodeURIComponent(s);
    } catch {
      throw new ApiError(0, `${JSON.stringify(String(s))} cannot be part of a URL`, segments[0]);
    }
  }).join("/");
}
