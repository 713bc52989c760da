"""CORS only for the origins QUEEN_CORS_ORIGINS lists (docs/decisions.md#cors; issue 25, point 1): a
page on another origin, open in a browser that can reach the broker, cannot call it."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from queen_trio.broker import open_broker
from queen_trio.web.routes import create_app
from tests.support.brokers import make_settings

APP = "https://app.example.com"
ELSEWHERE = "https://evil.example.net"
PREFLIGHT = {"access-control-request-method": "DELETE"}


def allow_headers(response: httpx.Response) -> dict[str, str]:
    return {k: v for k, v in response.headers.items() if k.startswith("access-control-allow-")}


@pytest.fixture
async def open_client(request, database_url) -> AsyncIterator[httpx.AsyncClient]:
    settings = make_settings(database_url, cors_origins=request.param)
    async with open_broker(settings, database_url) as broker:
        transport = httpx.ASGITransport(app=create_app(broker))
        async with httpx.AsyncClient(transport=transport, base_url="http://b") as client:
            yield client


@pytest.mark.parametrize("open_client", [()], indirect=True)
async def test_by_default_no_origin_gets_cors_headers(open_client):
    r = await open_client.options("/api/v1/resources/queues/orders",
                                  headers={"origin": ELSEWHERE, **PREFLIGHT})
    assert r.status_code == 204 and r.content == b""
    assert allow_headers(r) == {}
    for method, path in (("GET", "/api/v1/resources/queues"), ("GET", "/health"),
                         ("POST", "/api/v1/push"), ("GET", "/api/v1/pop/queue/q")):
        r = await open_client.request(method, path, headers={"origin": ELSEWHERE})
        assert allow_headers(r) == {}, (method, path)


@pytest.mark.parametrize("open_client", [(APP,)], indirect=True)
async def test_a_listed_origin_gets_the_reference_headers_and_others_none(open_client):
    r = await open_client.options("/api/v1/resources/queues/orders",
                                  headers={"origin": APP, **PREFLIGHT})
    assert r.status_code == 204
    assert allow_headers(r) == {
        "access-control-allow-origin": APP,
        "access-control-allow-methods": "GET, POST, PUT, DELETE, OPTIONS",
        "access-control-allow-headers": "Content-Type, Authorization"}
    assert r.headers["access-control-max-age"] == "86400"
    assert r.headers["vary"] == "Origin"
    r = await open_client.get("/api/v1/resources/queues", headers={"origin": APP})
    assert r.headers["access-control-allow-origin"] == APP

    r = await open_client.options("/api/v1/resources/queues/orders",
                                  headers={"origin": ELSEWHERE, **PREFLIGHT})
    assert r.status_code == 204 and allow_headers(r) == {}
    assert r.headers["vary"] == "Origin"
    r = await open_client.delete("/api/v1/resources/queues/orders",
                                 headers={"origin": ELSEWHERE})
    assert allow_headers(r) == {}


@pytest.mark.parametrize("open_client", [("*",)], indirect=True)
async def test_a_star_gives_every_reply_the_reference_headers(open_client):
    r = await open_client.options("/api/v1/push")
    assert r.status_code == 204 and r.content == b""
    assert r.headers["access-control-allow-origin"] == "*"
    r = await open_client.get("/api/v1/pop/queue/q", headers={"origin": ELSEWHERE})
    assert r.status_code == 204
    assert r.headers["access-control-allow-origin"] == "*"
    assert r.headers["access-control-allow-methods"] == "GET, POST, PUT, DELETE, OPTIONS"


@pytest.mark.parametrize("open_client", [(APP,)], indirect=True)
async def test_a_page_on_another_origin_cannot_push_pop_or_delete(open_client):
    """CORS keeps a foreign page from reading answers, not from sending requests: a form's
    POST or a no-cors fetch would still act. Such requests are refused before they act
    (docs/decisions.md#cross-site); the listed origin, the broker's own and clients that are
    not browsers are answered."""
    push = {"items": [{"queue": "q", "payload": {"n": 1}}]}
    refused = [
        ("POST", "/api/v1/push", {"origin": ELSEWHERE}),
        ("POST", "/api/v1/push", {"origin": "null"}),
        ("DELETE", "/api/v1/resources/queues/q", {"origin": ELSEWHERE}),
        ("GET", "/api/v1/pop/queue/q?autoAck=true",
         {"sec-fetch-site": "cross-site", "sec-fetch-mode": "no-cors"}),
        ("GET", "/api/v1/pop/queue/q?autoAck=true",
         {"sec-fetch-site": "same-site", "sec-fetch-mode": "no-cors"}),
    ]
    for method, path, headers in refused:
        r = await open_client.request(method, path, headers=headers,
                                      json=push if method == "POST" else None)
        assert r.status_code == 403, (method, path, headers)
        assert "cross-origin request refused" in r.json()["error"]
    # Nothing was pushed by the refused requests.
    r = await open_client.get("/api/v1/pop/queue/q?wait=false")
    assert r.status_code == 204
    for headers in ({"origin": APP}, {"origin": "http://b"}, {},
                    {"sec-fetch-site": "same-origin", "origin": "http://b"},
                    {"sec-fetch-site": "cross-site", "sec-fetch-mode": "navigate"}):
        r = await open_client.post("/api/v1/push", json=push, headers=headers)
        assert r.status_code in (200, 201), (headers, r.text)
    r = await open_client.get("/api/v1/pop/queue/q?batch=10&wait=false&autoAck=true")
    assert len(r.json()["messages"]) == 5
