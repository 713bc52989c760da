"""GET /api/v1/auth/whoami and the access level of every operations route (contract §11)."""

from __future__ import annotations

from tests.support.auth import SECRET, authed_client, bearer, token


async def test_whoami_without_authentication_is_admin(client):
    r = await client.get("/api/v1/auth/whoami")
    assert r.status_code == 200
    assert r.json() == {"sub": None, "role": None, "level": "admin"}


async def test_whoami_names_the_highest_level_of_any_valid_token(database_url):
    async with authed_client(database_url, JWT_SECRET=SECRET,
                             JWT_ROLE_READ_ONLY="viewer") as client:
        async def whoami(headers=None):
            return await client.get("/api/v1/auth/whoami", headers=headers or {})

        r = await whoami(bearer(token(sub="ann", role="viewer")))
        assert r.json() == {"sub": "ann", "role": "viewer", "level": "read-only"}
        r = await whoami(bearer(token(sub="bob", role="write-only")))
        assert r.json()["level"] == "write-only"
        r = await whoami(bearer(token(sub="cy", role=None, roles=["viewer", "admin"])))
        assert r.json() == {"sub": "cy", "role": "admin", "level": "admin"}
        # A valid token with no configured role may still ask who it is.
        r = await whoami(bearer(token(sub="dee", role="nobody")))
        assert r.status_code == 200 and r.json() == {"sub": "dee", "role": None, "level": None}
        r = await whoami()
        assert r.status_code == 401 and r.json() == {"error": "Authentication required"}
        r = await whoami(bearer(token(key="wrong-secret-wrong-secret-wrong-secret")))
        assert r.status_code == 401


async def test_levels_of_the_operations_routes(database_url):
    async with authed_client(database_url, JWT_SECRET=SECRET) as client:
        admin = bearer(token(role="admin", sub="boss"))  # minted now: tokens expire
        r = await client.post("/api/v1/push", json={"items": [{"queue": "q", "payload": 1}]},
                              headers=admin)
        assert r.status_code == 201
        levels = {
            "write-only": bearer(token(role="write-only")),
            "read-only": bearer(token(role="read-only")),
            "read-write": bearer(token(role="read-write")),
            "admin": admin,
        }
        routes = [
            ("GET", "/api/v1/resources/overview", None, "read-only"),
            ("GET", "/api/v1/resources/queues/q/depth", None, "read-only"),
            ("GET", "/api/v1/resources/partitions", None, "read-only"),
            ("GET", "/api/v1/consumer-groups", None, "read-only"),
            ("GET", "/api/v1/status", None, "read-only"),
            ("GET", "/api/v1/analytics/queue-ops", None, "read-only"),
            ("POST", "/api/v1/consumer-groups/g/queues/q/seek", {"toEnd": True}, "read-write"),
            ("POST", "/api/v1/consumer-groups/g/subscription",
             {"subscriptionTimestamp": "2020-01-01T00:00:00Z"}, "read-write"),
            ("DELETE", "/api/v1/consumer-groups/g", None, "admin"),
            ("DELETE", "/api/v1/consumer-groups/g/queues/q", None, "admin"),
            ("POST", "/api/v1/stats/refresh", None, "admin"),
        ]
        order = list(levels)
        for method, path, body, needed in routes:
            for level, headers in levels.items():
                r = await client.request(method, path, json=body, headers=headers)
                allowed = order.index(level) >= order.index(needed)
                assert (r.status_code == 200) == allowed, (method, path, level, r.text)
                if not allowed:
                    assert r.status_code == 403
        for path in ("/metrics", "/metrics/prometheus", "/health"):
            assert (await client.get(path)).status_code == 200
