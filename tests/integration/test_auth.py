"""Authentication (docs/decisions.md#auth): tokens, algorithms, key sources, levels, producerSub."""

from __future__ import annotations

import http.server
import json
import threading

import jwt
import pytest
import trio
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa

from tests.support.auth import SECRET, authed_client, bearer, token

PUSH = {"items": [{"queue": "secure", "payload": {"n": 1}, "producerSub": "forged"}]}


async def test_write_only_token_reaches_push_and_nothing_else(database_url):
    async with authed_client(database_url, JWT_SECRET=SECRET) as client:
        writer = bearer(token(sub="producer-7", role="write-only"))
        r = await client.post("/api/v1/push", json=PUSH, headers=writer)
        assert r.status_code == 201, r.text
        for method, path in [("GET", "/api/v1/pop/queue/secure"), ("POST", "/api/v1/configure"),
                             ("GET", "/api/v1/dlq"), ("GET", "/api/v1/traces/names"),
                             ("POST", "/api/v1/ack"), ("POST", "/api/v1/transaction"),
                             ("DELETE", "/api/v1/resources/queues/secure")]:
            r = await client.request(method, path, headers=writer, json={})
            assert r.status_code == 403, (method, path, r.text)
            assert r.json() == {"error": "Insufficient permissions"}
        reader = bearer(token(role="read-write"))
        r = await client.get("/api/v1/pop/queue/secure", headers=reader)
        assert r.status_code == 200
        assert r.json()["messages"][0]["producerSub"] == "producer-7"


async def test_levels_and_public_routes(database_url):
    async with authed_client(database_url, JWT_SECRET=SECRET) as client:
        assert (await client.get("/health")).status_code == 200
        assert (await client.options("/api/v1/push")).status_code == 204
        read_only = bearer(token(role="read-only"))
        assert (await client.get("/api/v1/dlq", headers=read_only)).status_code == 200
        assert (await client.get("/api/v1/pop/queue/q", headers=read_only)).status_code == 403
        assert (await client.post("/api/v1/push", json=PUSH, headers=read_only)).status_code == 403
        rw = bearer(token(role=None, roles=["read-write"]))
        assert (await client.post("/api/v1/configure", json={"queue": "q"},
                                  headers=rw)).status_code == 200
        assert (await client.delete("/api/v1/resources/queues/q", headers=rw)).status_code == 403
        admin = bearer(token(role="admin"))
        assert (await client.delete("/api/v1/resources/queues/q", headers=admin)).status_code == 200
        nobody = bearer(token(role="guest"))
        assert (await client.get("/api/v1/dlq", headers=nobody)).status_code == 403


async def test_transaction_push_is_stamped_with_the_token_sub(database_url):
    async with authed_client(database_url, JWT_SECRET=SECRET) as client:
        rw = bearer(token(sub="tx-writer"))
        r = await client.post("/api/v1/transaction", headers=rw, json={"operations": [
            {"type": "push", "items": [{"queue": "t", "payload": 1, "producerSub": "x"}]}]})
        assert r.json()["success"] is True
        r = await client.get("/api/v1/pop/queue/t", headers=rw)
        assert r.json()["messages"][0]["producerSub"] == "tx-writer"


def ok_token(**overrides):
    return token(**{"aud": "queen", "iss": "issuer-1", **overrides})


@pytest.mark.parametrize(("make", "message"), [
    (lambda: None, "Authentication required"),
    (lambda: "Bearer ", "Empty token"),
    (lambda: "Bearer " + ok_token(exp=-120), "Token has expired"),
    (lambda: "Bearer " + ok_token(key="another-secret-of-enough-length-98765"),
     "Invalid token signature"),
    (lambda: "Bearer " + ok_token(aud="someone-else"), "Invalid token audience"),
    (lambda: "Bearer " + ok_token(iss="mallory"), "Invalid token issuer"),
    (lambda: "Bearer " + ok_token(exp=None), "missing the exp claim"),
    (lambda: "Bearer not.a.jwt", "Token decode error"),
    (lambda: ok_token(), None),  # without the Bearer prefix the header is the token
])
async def test_token_failures_are_401(database_url, make, message):
    env = {"JWT_SECRET": SECRET, "JWT_AUDIENCE": "queen", "JWT_ISSUER": "issuer-1"}
    async with authed_client(database_url, **env) as client:
        value = make()
        headers = {} if value is None else {"Authorization": value}
        r = await client.get("/api/v1/dlq", headers=headers)
        if message is None:
            assert r.status_code == 200, r.text
            return
        assert r.status_code == 401, r.text
        assert message in r.json()["error"]


async def test_token_without_exp_is_accepted_when_allowed(database_url):
    async with authed_client(database_url, JWT_SECRET=SECRET, JWT_ALLOW_NO_EXP="true") as client:
        r = await client.get("/api/v1/dlq", headers=bearer(token(exp=None)))
        assert r.status_code == 200


async def test_role_names_are_configurable(database_url):
    async with authed_client(database_url, JWT_SECRET=SECRET,
                             JWT_ROLE_WRITE_ONLY="ingest") as client:
        r = await client.post("/api/v1/push", json=PUSH, headers=bearer(token(role="ingest")))
        assert r.status_code == 201
        r = await client.post("/api/v1/push", json=PUSH, headers=bearer(token(role="write-only")))
        assert r.status_code == 403


def rsa_pem():
    private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    public = private.public_key().public_bytes(serialization.Encoding.PEM,
                                               serialization.PublicFormat.SubjectPublicKeyInfo)
    return private, public.decode()


async def test_rs256_with_a_pem_public_key(database_url):
    private, public = rsa_pem()
    async with authed_client(database_url, JWT_ALGORITHM="RS256", JWT_PUBLIC_KEY=public) as client:
        ok = bearer(token(key=private, alg="RS256"))
        assert (await client.get("/api/v1/dlq", headers=ok)).status_code == 200
        other, _ = rsa_pem()
        bad = bearer(token(key=other, alg="RS256"))
        assert (await client.get("/api/v1/dlq", headers=bad)).status_code == 401
        hs = bearer(token())
        r = await client.get("/api/v1/dlq", headers=hs)
        assert r.status_code == 401 and "expected RS256" in r.json()["error"]


def jwk_of(private, kid, alg):
    public = private.public_key()
    algorithm = {"ES256": jwt.algorithms.ECAlgorithm, "EdDSA": jwt.algorithms.OKPAlgorithm,
                 "RS256": jwt.algorithms.RSAAlgorithm}[alg]
    entry = json.loads(algorithm.to_jwk(public))
    return {**entry, "kid": kid, "alg": alg}


class _JWKSHandler(http.server.BaseHTTPRequestHandler):
    document: dict = {}

    def do_GET(self):  # noqa: N802
        body = json.dumps(self.document).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


async def test_es256_with_a_jwks_served_over_http(database_url):
    key = ec.generate_private_key(ec.SECP256R1())
    handler = type("H", (_JWKSHandler,), {"document": {"keys": [jwk_of(key, "k1", "ES256")]}})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/jwks.json"
        async with authed_client(database_url, JWT_ALGORITHM="ES256", JWT_JWKS_URL=url,
                                 JWT_JWKS_REFRESH_INTERVAL="1") as client:
            ok = bearer(token(key=key, alg="ES256", kid="k1"))
            assert (await client.get("/api/v1/dlq", headers=ok)).status_code == 200
            unknown = bearer(token(key=key, alg="ES256", kid="k9"))
            r = await client.get("/api/v1/dlq", headers=unknown)
            assert r.status_code == 401 and "Unknown key ID: k9" in r.json()["error"]
            # The JWKS server goes away and the cache turns stale: cached keys keep working.
            server.shutdown()
            server.server_close()
            await trio.sleep(1.1)  # past JWT_JWKS_REFRESH_INTERVAL: the next token refetches
            assert (await client.get("/api/v1/dlq", headers=ok)).status_code == 200
    finally:
        server.shutdown()
        server.server_close()


async def test_eddsa_with_a_jwks_file(database_url, tmp_path):
    key = ed25519.Ed25519PrivateKey.generate()
    path = tmp_path / "jwks.json"
    path.write_text(json.dumps({"keys": [jwk_of(key, "ed", "EdDSA")]}))
    async with authed_client(database_url, JWT_ALGORITHM="EdDSA", JWT_JWKS_URL=str(path)) as client:
        ok = bearer(token(key=key, alg="EdDSA", kid="ed"))
        assert (await client.get("/api/v1/dlq", headers=ok)).status_code == 200


async def test_auto_picks_the_algorithm_per_token(database_url):
    private, public = rsa_pem()
    async with authed_client(database_url, JWT_ALGORITHM="auto", JWT_SECRET=SECRET,
                             JWT_PUBLIC_KEY=public) as client:
        for t in (token(), token(key=private, alg="RS256")):
            assert (await client.get("/api/v1/dlq", headers=bearer(t))).status_code == 200


async def test_auto_without_a_public_key_refuses_asymmetric_tokens_with_401(database_url):
    private, _ = rsa_pem()
    async with authed_client(database_url, JWT_ALGORITHM="auto", JWT_SECRET=SECRET) as client:
        r = await client.get("/api/v1/dlq", headers=bearer(token(key=private, alg="RS256")))
        assert r.status_code == 401 and "no JWT_PUBLIC_KEY or JWT_JWKS_URL" in r.json()["error"]
