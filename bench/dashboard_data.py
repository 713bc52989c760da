"""Data for the dashboard's benchmarks and screenshots: queues and messages through the HTTP
API, and hours of samples written straight into the sample tables (what the stats sampler
would have written every 10 s, and the elected snapshot once a minute, over that time).
"""

from __future__ import annotations

import json
import math
import urllib.request

import asyncpg

# One broker process sampling every 10 s, with a daily rhythm and a burst now and then.
WORKER_SAMPLES = """
INSERT INTO queen.worker_samples
SELECT $1, t, 'bench-host', 4242, now() - interval '2 days', 10000,
       r * 3, 0, r, r * 10, r, r / 4, r * 9, r, r * 9, r / 50, 0, r / 100, 0, r * 4, 0,
       0.6 + w, 3 + 6 * w, 8 + 20 * w, 2 + 3 * w, 150000000 + (w * 40000000)::bigint,
       20, 10, 6, 4, 0, 0, 0, 0, 0, '{}'::jsonb
  FROM generate_series(now() - make_interval(hours => $2), now() - interval '10 seconds',
                       interval '10 seconds') AS t,
       LATERAL (SELECT (0.5 + 0.5 * sin(extract(epoch FROM t) / 3600.0)) AS w) AS wave,
       LATERAL (SELECT (40 + 60 * w + CASE WHEN extract(minute FROM t)::int % 17 = 0
                                           THEN 200 ELSE 0 END)::bigint AS r) AS rate
ON CONFLICT DO NOTHING
"""
# Per queue and minute: the snapshot the stats maintenance takes.
QUEUE_SNAPSHOTS = """
INSERT INTO queen.queue_snapshots
SELECT q.name, t, 2, 100, (20 + 30 * w)::bigint, 2, (w * 3)::bigint, 1, (20 + 30 * w)::bigint,
       30 + 300 * w, 10 + 100 * w
  FROM queen.queues q,
       generate_series(date_trunc('minute', now()) - make_interval(hours => $1),
                       date_trunc('minute', now()) - interval '1 minute', interval '1 minute') AS t,
       LATERAL (SELECT (0.5 + 0.5 * sin(extract(epoch FROM t) / 5400.0
                                        + hashtext(q.name) % 7)) AS w) AS wave
ON CONFLICT DO NOTHING
"""
# Per queue with traffic (the first $2 queues by name) and sampling interval.
QUEUE_SAMPLES = """
INSERT INTO queen.queue_samples
SELECT q.name, t, $3, 'bench-host', 4242, 10000, r, r / 2, r / 10, r, r, r / 50, 0, r / 100, 0
  FROM (SELECT name FROM queen.queues ORDER BY name LIMIT $2) q,
       generate_series(now() - make_interval(hours => $1), now() - interval '10 seconds',
                       interval '10 seconds') AS t,
       LATERAL (SELECT (5 + 10 * (0.5 + 0.5 * sin(extract(epoch FROM t) / 3600.0
                                                   + hashtext(q.name) % 5)))::bigint AS r) AS rate
ON CONFLICT DO NOTHING
"""


async def write_samples(database_url: str, *, hours: int, busy_queues: int,
                        worker_id: str = "bench-worker") -> dict[str, int]:
    """`hours` of samples ending now; returns the rows written per table."""
    conn = await asyncpg.connect(database_url)
    try:
        counts = {}
        await conn.execute(WORKER_SAMPLES, worker_id, hours)
        await conn.execute(QUEUE_SNAPSHOTS, hours)
        await conn.execute(QUEUE_SAMPLES, hours, busy_queues, worker_id)
        for table in ("worker_samples", "queue_snapshots", "queue_samples"):
            counts[table] = await conn.fetchval(f"SELECT count(*) FROM queen.{table}")
        return counts
    finally:
        await conn.close()


def post(base: str, path: str, body: object) -> object:
    request = urllib.request.Request(base + path, data=json.dumps(body).encode(),
                                     headers={"content-type": "application/json"})
    with urllib.request.urlopen(request, timeout=120) as reply:
        return json.loads(reply.read() or b"null")


def get(base: str, path: str) -> object:
    with urllib.request.urlopen(base + path, timeout=120) as reply:
        return json.loads(reply.read() or b"null")


def push_queues(base: str, *, queues: int, messages: int, partitions: int = 2,
                batch: int = 1000) -> None:
    """`messages` spread over `queues` queues (`partitions` each), `batch` items a request."""
    per_queue = math.ceil(messages / queues)
    items = ({"queue": f"bench.q{q:04d}", "partition": f"p{n % partitions}",
              "payload": {"queue": q, "n": n, "text": "x" * 40}}
             for q in range(queues) for n in range(per_queue))
    chunk: list[dict[str, object]] = []
    for item in items:
        chunk.append(item)
        if len(chunk) == batch:
            post(base, "/api/v1/push", {"items": chunk})
            chunk = []
    if chunk:
        post(base, "/api/v1/push", {"items": chunk})
