"""Authentication and access levels (docs/decisions.md#auth; contract §11).

Off unless JWT_ENABLED=true. Tokens are verified by PyJWT (on top of `cryptography`) with
HS256 (JWT_SECRET), RS256, ES256 or EdDSA (a PEM JWT_PUBLIC_KEY, or a JWKS from JWT_JWKS_URL,
a URL or a file path, fetched off the event loop), or `auto` (by the token's header).

Levels: write-only reaches push and nothing else; read-only the GET routes except pops;
read-write everything but admin routes; admin everything. Public routes need nothing.
"""

from __future__ import annotations

import json
import logging
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs
import jwt
import trio

from ..errors import ConfigError
from ..settings import ALGORITHMS, AuthSettings
from .http import HTTPError

log = logging.getLogger("queen_trio.auth")

JWKS_COOLDOWN = 30.0
# After a failed JWKS fetch, how long the cached keys are used without trying again.
JWKS_FAILURE_BACKOFF = 30.0
# What each access level of a route needs, and what each role grants.
PUBLIC, PUSH, READ, WRITE, ADMIN = "public", "push", "read", "write", "admin"
GRANTS = {
    "write-only": {PUSH},
    "read-only": {READ},
    "read-write": {PUSH, READ, WRITE},
    "admin": {PUSH, READ, WRITE, ADMIN},
}


# Levels from least to most: whoami names the highest one a token's roles give.
LEVEL_ORDER = ("write-only", "read-only", "read-write", "admin")


@attrs.frozen
class Identity:
    """Who a request is: the token's `sub`, its highest configured role and that role's level
    (admin for everyone while authentication is off)."""

    sub: str | None
    role: str | None
    level: str | None


def _fetch_jwks(source: str, timeout: float) -> dict[str, Any]:
    """Blocking: run in a worker thread. A URL, or a file path."""
    document: object
    if source.startswith(("http://", "https://")):
        try:
            with urllib.request.urlopen(source, timeout=timeout) as response:
                document = json.load(response)
        except urllib.error.HTTPError as exc:
            exc.close()  # it holds the response open
            raise
    else:
        document = json.loads(Path(source.removeprefix("file://")).read_text())
    if not isinstance(document, dict):
        raise ValueError("a JWKS is a JSON object")
    return document


class Authenticator:
    def __init__(self, settings: AuthSettings) -> None:
        self.settings = settings
        self._jwks: dict[str | None, jwt.PyJWK] = {}
        self._jwks_at = 0.0
        self._refreshing: trio.Event | None = None  # the fetch in flight
        self._failed_at: float | None = None  # when the last fetch failed
        self._fetcher = trio.CapacityLimiter(1)
        self._role_to_level = {name: level for level, name in settings.role_names.items()}

    async def start(self) -> None:
        """Fetch the JWKS once at boot, so a bad JWT_JWKS_URL refuses to start."""
        if self.settings.enabled and self.settings.jwks_url:
            try:
                await self._refresh_jwks()
            except Exception as exc:
                raise ConfigError(f"JWT_JWKS_URL {self.settings.jwks_url!r} cannot be read: "
                                  f"{exc}") from None

    async def _refresh_jwks(self) -> None:
        """Fetch the JWKS; single flight: callers that arrive while a fetch is in flight wait
        for it and share its keys (they raise nothing: they look at the keys). A failure is
        remembered, and no fetch is tried again for JWKS_FAILURE_BACKOFF seconds. Fetches
        have a thread of their own, so a slow JWKS server never takes the worker threads the
        spool and the embedded cluster need."""
        if self._refreshing is not None:
            await self._refreshing.wait()
            return
        s = self.settings
        assert s.jwks_url is not None
        self._refreshing = trio.Event()
        try:
            document = await trio.to_thread.run_sync(
                _fetch_jwks, s.jwks_url, s.jwks_timeout_seconds, limiter=self._fetcher)
            keys: dict[str | None, jwt.PyJWK] = {}
            for entry in jwt.PyJWKSet.from_dict(document).keys:
                keys.setdefault(None, entry)  # a token without kid uses the first key
                keys[entry.key_id] = entry
        except BaseException:
            self._failed_at = time.monotonic()
            raise
        finally:
            self._refreshing.set()
            self._refreshing = None
        self._jwks, self._jwks_at, self._failed_at = keys, time.monotonic(), None

    def _backing_off(self) -> bool:
        return (self._failed_at is not None
                and time.monotonic() - self._failed_at < JWKS_FAILURE_BACKOFF)

    async def _key_for(self, header: dict[str, Any], algorithm: str) -> Any:
        s = self.settings
        if algorithm == "HS256":
            if not s.secret:
                raise HTTPError(401, "Token uses HS256, but no JWT_SECRET is configured")
            return s.secret
        if s.public_key and not s.jwks_url:
            return s.public_key
        if not s.jwks_url:
            raise HTTPError(401, f"Token uses {algorithm}, but no JWT_PUBLIC_KEY or "
                                 "JWT_JWKS_URL is configured")
        kid = header.get("kid")
        age = time.monotonic() - self._jwks_at
        stale = age > s.jwks_refresh_seconds
        # An unknown kid refetches at most every JWKS_COOLDOWN seconds.
        if (stale or (kid not in self._jwks and age > JWKS_COOLDOWN)) and not self._backing_off():
            try:
                await self._refresh_jwks()
            except Exception as exc:
                log.error("JWKS fetch failed", extra={"url": s.jwks_url, "error": str(exc)})
                if kid not in self._jwks:
                    raise HTTPError(500, "Failed to fetch JWKS") from None
                # The cached keys keep working while the JWKS server is down.
        if kid not in self._jwks:
            if s.public_key:
                return s.public_key
            raise HTTPError(401, f"Unknown key ID: {kid}")
        return self._jwks[kid].key

    async def authenticate(self, headers: Mapping[bytes, bytes], needs: str) -> str | None:
        """The token's `sub` when the route's level is met; raises 401/403 otherwise."""
        if not self.settings.enabled or needs == PUBLIC:
            return None
        claims = await self._claims(headers)
        levels = self._levels(claims)
        if not any(needs in GRANTS[level] for level in levels):
            raise HTTPError(403, "Insufficient permissions")
        sub = claims.get("sub")
        return sub if isinstance(sub, str) else None

    async def identify(self, headers: Mapping[bytes, bytes]) -> Identity:
        """Who the request is (GET /api/v1/auth/whoami): any valid token answers, even one
        that carries no configured role (its level is then None); 401 without one."""
        if not self.settings.enabled:
            return Identity(None, None, "admin")
        claims = await self._claims(headers)
        levels = self._levels(claims)
        level = max(levels, key=LEVEL_ORDER.index, default=None)
        sub = claims.get("sub")
        return Identity(sub if isinstance(sub, str) else None,
                        None if level is None else self.settings.role_names[level], level)

    async def _claims(self, headers: Mapping[bytes, bytes]) -> dict[str, Any]:
        raw = headers.get(b"authorization")
        if raw is None:
            raise HTTPError(401, "Authentication required")
        token = raw.decode("latin-1").strip()
        scheme, _, rest = token.partition(" ")
        if scheme.lower() == "bearer":  # without the prefix, the header is the token
            token = rest.strip()
        if not token:
            raise HTTPError(401, "Empty token")
        return await self._verify(token)

    async def grants(self, headers: Mapping[bytes, bytes], level: str) -> bool:
        """Whether the request's credentials reach `level` (with authentication off, every
        request does)."""
        try:
            await self.authenticate(headers, level)
        except HTTPError:
            return False
        return True

    async def _verify(self, token: str) -> dict[str, Any]:
        s = self.settings
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError as exc:
            raise HTTPError(401, f"Token decode error: {exc}") from None
        algorithm = header.get("alg")
        if s.algorithm == "auto":
            if algorithm not in ALGORITHMS:
                raise HTTPError(401, f"Unsupported algorithm: {algorithm}")
        elif algorithm != s.algorithm:
            raise HTTPError(401, f"Token uses {algorithm}, expected {s.algorithm}")
        key = await self._key_for(header, algorithm)
        options = {"require": [] if s.allow_no_exp else ["exp"]}
        try:
            return jwt.decode(token, key, algorithms=[algorithm], options=options,  # type: ignore[arg-type]
                              audience=s.audience, issuer=s.issuer, leeway=s.clock_skew)
        except jwt.ExpiredSignatureError:
            raise HTTPError(401, "Token has expired") from None
        except jwt.MissingRequiredClaimError as exc:
            raise HTTPError(401, f"Token is missing the {exc.claim} claim") from None
        except jwt.InvalidIssuerError:
            raise HTTPError(401, "Invalid token issuer") from None
        except jwt.InvalidAudienceError:
            raise HTTPError(401, "Invalid token audience") from None
        except jwt.InvalidSignatureError:
            raise HTTPError(401, "Invalid token signature") from None
        except jwt.PyJWTError as exc:
            raise HTTPError(401, f"Token decode error: {exc}") from None

    def _levels(self, claims: dict[str, Any]) -> set[str]:
        roles: set[str] = set()
        single = claims.get(self.settings.roles_claim)
        if isinstance(single, str):
            roles.add(single)
        many = claims.get(self.settings.roles_array_claim)
        if isinstance(many, list):
            roles.update(r for r in many if isinstance(r, str))
        return {self._role_to_level[r] for r in roles if r in self._role_to_level}
