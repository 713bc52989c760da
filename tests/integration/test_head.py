"""HEAD is GET without a body on the dashboard's files, /health and the read routes; on a pop
route it stays 405, since a HEAD never claims (issue 25, point 12)."""

from __future__ import annotations

import httpx

from tests.support.consuming import pop, push


async def test_head_answers_as_get_without_a_body(http_url, client):
    await push(client, "heads", 1)
    async with httpx.AsyncClient(base_url=http_url) as web:
        for path in ("/health", "/", "/dashboard/app.css", "/api/v1/resources/queues",
                     "/api/v1/resources/queues/heads", "/metrics/prometheus"):
            got, head = await web.get(path), await web.head(path)
            assert head.status_code == got.status_code == 200, path
            assert head.content == b"", path
            assert head.headers["content-type"] == got.headers["content-type"], path
            if path != "/metrics/prometheus":  # a live figure may change in between
                assert int(head.headers["content-length"]) == len(got.content), path
        assert (await web.head("/api/v1/resources/queues/nowhere")).status_code == 404
        assert (await web.head("/dashboard/app.css")).headers["etag"]


async def test_head_on_a_pop_route_is_405_and_claims_nothing(http_url, client):
    await push(client, "heads", 1)
    async with httpx.AsyncClient(base_url=http_url) as web:
        for path in ("/api/v1/pop/queue/heads", "/api/v1/pop/queue/heads/partition/Default",
                     "/api/v1/pop?namespace=heads"):
            r = await web.head(path)
            assert r.status_code == 405 and r.content == b"", path
        assert (await web.head("/api/v1/push")).status_code == 405
    assert [m["data"] for m in (await pop(client, "heads"))["messages"]] == [1]
