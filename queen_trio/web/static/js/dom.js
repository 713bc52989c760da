// Elements are built from data, never from HTML text: every string lands in a text node or
// an attribute value, so a payload, a name or an error text can never become markup.

const REFUSED = new Set(["innerHTML", "outerHTML", "style", "srcdoc"]);

export function h(tag, props, ...children) {
  const el = tag.startsWith("svg:")
    ? document.createElementNS("http://www.w3.org/2000/svg", tag.slice(4))
    : document.createElement(tag);
  for (const [key, value] of Object.entries(props || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (REFUSED.has(key)) throw new Error(`h(): ${key} is not allowed`);
    if (key.startsWith("on")) {
      if (typeof value !== "function") throw new Error(`h(): ${key} must be a function`);
      el.addEventListener(key.slice(2), value);
    } else if (key === "class") {
      el.setAttribute("class", value);
    } else if (key === "dataset") {
      Object.assign(el.dataset, value);
    } else if (key === "value" || key === "checked" || key === "selected") {
      el[key] = value;
    } else {
      el.setAttribute(key, value === true ? "" : String(value));
    }
  }
  append(el, children);
  return el;
}

export function append(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : String(child));
  }
  return el;
}

// Replace an element's children, keeping the keyboard focus on the element with the same
// data-key if there was one (a live refresh must not throw the user's focus away).
export function replace(el, ...children) {
  const active = document.activeElement;
  const key = active && el.contains(active) ? active.dataset.key : undefined;
  el.replaceChildren();
  append(el, children);
  if (key !== undefined) {
    const again = [...el.querySelectorAll("[data-key]")].find((node) => node.dataset.key === key);
    if (again) again.focus({ preventScroll: true });
  }
  return el;
}

// A hash link: #/path/segments?query, every segment percent-encoded.
export function href(segments, query) {
  const path = segments.map((s) => encodeURIComponent(s)).join("/");
  const params = new URLSearchParams();
  for (const [key, value] of Object.entries(query || {})) {
    if (value !== null && value !== undefined && value !== "") params.set(key, value);
  }
  const q = params.toString();
  return `#/${path}${q ? `?${q}` : ""}`;
}

export function link(segments, text, query, props) {
  return h("a", { href: href(segments, query), ...props }, text);
}
