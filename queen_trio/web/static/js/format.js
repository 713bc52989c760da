// Numbers, times and sizes as people read them.

const integer = new Intl.NumberFormat(undefined, { maximumFractionDigits: 0 });
const decimal = new Intl.NumberFormat(undefined, { maximumFractionDigits: 2 });

export function num(value) {
  if (value === null || value === undefined || Number.isNaN(value)) return "–";
  return Number.isInteger(value) ? integer.format(value) : decimal.format(value);
}

// "1 queue", "3 queues".
// A consumer group's name as people read it: queue mode's internal name is "queue mode"
// (the API keeps __QUEUE_MODE__, as the reference's contract has it).
export const QUEUE_MODE = "__QUEUE_MODE__";
export function groupLabel(name) {
  return name === QUEUE_MODE ? "queue mode" : name;
}

export function plural(count, word, many = `${word}s`) {
  return `${num(count)} ${count === 1 ? word : many}`;
}

export function rate(value) {
  return `${num(value)}/s`;
}

export function pct(value) {
  return value === null || value === undefined ? "–" : `${decimal.format(value)} %`;
}

export function duration(seconds) {
  if (seconds === null || seconds === undefined) return "–";
  const s = Math.abs(seconds);
  if (s < 1) return `${Math.round(s * 1000)} ms`;
  if (s < 60) return `${decimal.format(s)} s`;
  if (s < 3600) return `${Math.floor(s / 60)} min ${Math.round(s % 60)} s`;
  if (s < 86400) return `${Math.floor(s / 3600)} h ${Math.round((s % 3600) / 60)} min`;
  return `${Math.floor(s / 86400)} d ${Math.round((s % 86400) / 3600)} h`;
}

export function ms(value) {
  return value === null || value === undefined ? "–" : `${decimal.format(value)} ms`;
}

export function bytes(value) {
  if (value === null || value === undefined) return "–";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let v = value;
  let unit = 0;
  while (v >= 1024 && unit < units.length - 1) {
    v /= 1024;
    unit += 1;
  }
  return `${unit ? decimal.format(v) : v} ${units[unit]}`;
}

// "14:03:07.123" today, "Dec 1, 14:03:07" another day; the full ISO text is the title.
export function time(iso) {
  if (!iso) return "–";
  const at = new Date(iso);
  const today = new Date().toDateString() === at.toDateString();
  const clock = at.toLocaleTimeString(undefined, { hour: "2-digit", minute: "2-digit", second: "2-digit",
                                                    hour12: false, fractionalSecondDigits: 3 });
  return today ? clock : `${at.toLocaleDateString(undefined, { month: "short", day: "numeric" })}, ${clock}`;
}

export function ago(iso) {
  if (!iso) return "never";
  const seconds = (Date.now() - new Date(iso).getTime()) / 1000;
  if (seconds < 1) return "just now";
  if (seconds < 60) return `${Math.round(seconds)} s ago`;
  return `${duration(seconds).replace(/ \d+ (s|min|h)$/, "")} ago`;
}

// A JSON value pretty-printed (payloads are data: shown as text, always).
export function json(value) {
  return value === undefined ? "" : JSON.stringify(value, null, 2);
}

// Seconds since the epoch, for the charts.
export function epoch(iso) {
  return new Date(iso).getTime() / 1000;
}

// <input type="datetime-local"> text (local time) to ISO and back.
export function fromLocalInput(text) {
  return text ? new Date(text).toISOString() : "";
}

export function toLocalInput(iso) {
  if (!iso) return "";
  const at = new Date(iso);
  const pad = (n) => String(n).padStart(2, "0");
  return `${at.getFullYear()}-${pad(at.getMonth() + 1)}-${pad(at.getDate())}T${pad(at.getHours())}:${pad(at.getMinutes())}:${pad(at.getSeconds())}`;
}
