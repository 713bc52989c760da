"""JWKS refresh: single flight, a failure remembered for a backoff, a thread of its own
(issue 8, point 9). A real JWKS server over HTTP that counts its fetches."""

from __future__ import annotations

import http.server
import json
import threading
import time

import jwt
import trio
import trio.testing
from cryptography.hazmat.primitives.asymmetric import ec

from queen_trio.settings import AuthSettings
from queen_trio.web.auth import Authenticator


class CountingJWKS(http.server.BaseHTTPRequestHandler):
    document: dict = {}
    fetches = 0
    failing = False
    gate = threading.Event()

    def do_GET(self):  # noqa: N802
        type(self).fetches += 1
        type(self).gate.wait(30)
        if type(self).failing:
            self.send_response(500)
            self.end_headers()
            return
        body = json.dumps(self.document).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


async def test_jwks_refresh_is_single_flight_backs_off_and_has_its_own_thread():
    key = ec.generate_private_key(ec.SECP256R1())
    entry = {**json.loads(jwt.algorithms.ECAlgorithm.to_jwk(key.public_key())), "kid": "k1",
             "alg": "ES256"}
    handler = type("H", (CountingJWKS,), {"document": {"keys": [entry]}, "fetches": 0,
                                         "gate": threading.Event()})
    handler.gate.set()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        auth = Authenticator(AuthSettings(
            enabled=True, algorithm="ES256",
            jwks_url=f"http://127.0.0.1:{server.server_address[1]}/jwks",
            jwks_refresh_seconds=0.2, jwks_timeout_seconds=10))
        await auth.start()
        assert handler.fetches == 1
        token = jwt.encode({"sub": "s", "role": "read-write", "exp": time.time() + 300}, key,
                           algorithm="ES256", headers={"kid": "k1"})
        headers = {b"authorization": f"Bearer {token}".encode()}
        await trio.sleep(0.3)  # the cache turns stale

        # Ten requests meet the stale cache while the JWKS server is slow: one fetch.
        handler.gate.clear()
        subjects = []

        async def authenticate():
            subjects.append(await auth.authenticate(headers, "read"))

        async with trio.open_nursery() as nursery:
            for _ in range(10):
                nursery.start_soon(authenticate)
            while handler.fetches < 2:
                await trio.sleep(0.01)
            await trio.testing.wait_all_tasks_blocked(cushion=0.1)
            # The fetch waits in a thread of its own, not one of trio's default ones.
            assert trio.to_thread.current_default_thread_limiter().borrowed_tokens == 0
            handler.gate.set()
        assert subjects == ["s"] * 10
        assert handler.fetches == 2

        # The JWKS server fails: one attempt, then the cached keys, without asking again.
        handler.failing = True
        await trio.sleep(0.3)
        for _ in range(5):
            assert await auth.authenticate(headers, "read") == "s"
        assert handler.fetches == 3
    finally:
        handler.gate.set()
        server.shutdown()
        server.server_close()
