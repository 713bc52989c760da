"""Tokens and a broker with authentication on, for auth tests."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import jwt

from queen_trio.broker import open_broker
from queen_trio.settings import AuthSettings
from queen_trio.web.routes import create_app
from tests.support.brokers import make_settings

SECRET = "test-secret-with-enough-length-0123456789"


def token(sub: str | None = "svc-1", role: str | None = "read-write", key: Any = SECRET,
          alg: str = "HS256", exp: int | None = 300, **claims: Any) -> str:
    payload = {"sub": sub, **claims}
    if role is not None:
        payload["role"] = role
    if exp is not None:
        payload["exp"] = int(time.time()) + exp
    headers = {"kid": claims.pop("kid")} if "kid" in claims else None
    payload.pop("kid", None)
    return jwt.encode(payload, key, algorithm=alg, headers=headers)


@asynccontextmanager
async def authed_client(database_url: str, **env: str) -> AsyncIterator[httpx.AsyncClient]:
    auth = AuthSettings.from_env({"JWT_ENABLED": "true", **env})
    async with open_broker(make_settings(database_url, auth=auth), database_url) as broker:
        transport = httpx.ASGITransport(app=create_app(broker))
        async with httpx.AsyncClient(transport=transport, base_url="http://b") as client:
            yield client


def bearer(t: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {t}"}
