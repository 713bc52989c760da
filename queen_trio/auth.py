"""Authentication and access levels (DECISIONS: Auth; contract §11).

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
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs
import jwt
import trio

from .http import HTTPError
from .settings import ConfigError

log = logging.getLogger("queen_trio.auth")

ALGORITHMS = ("HS256", "RS256", "ES256", "EdDSA")
JWKS_COOLDOWN = 30.0
# What each access level of a route needs, and what each role grants.
PUBLIC, PUSH, READ, WRITE, ADMIN = "public", "push", "read", "write", "admin"
GRANTS = {
    "write-only": {PUSH},
    "read-only": {READ},
    "read-write": {PUSH, READ, WRITE},
    "admin": {PUSH, READ, WRITE, ADMIN},
}


def _true(value: str | None) -> bool:
    return (value or "").strip().lower() in ("true", "1")


@attrs.frozen
class AuthSettings:
    enabled: bool = False
    algorithm: str = "HS256"
    secret: str | None = None
    public_key: str | None = None
    jwks_url: str | None = None
    issuer: str | None = None
    audience: str | None = None
    clock_skew: float = 30.0
    allow_no_exp: bool = False
    roles_claim: str = "role"
    roles_array_claim: str = "roles"
    role_names: Mapping[str, str] = attrs.field(factory=lambda: {k: k for k in GRANTS})
    jwks_refresh_seconds: float = 3600.0
    jwks_timeout_seconds: float = 5.0

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> AuthSettings:
        if not _true(env.get("JWT_ENABLED")):
            return cls()
        algorithm = env.get("JWT_ALGORITHM") or "HS256"
        if algorithm not in (*ALGORITHMS, "auto"):
            raise ConfigError(f"JWT_ALGORITHM={algorithm!r} is not one of "
                              f"{', '.join(ALGORITHMS)}, auto")
        public_key = env.get("JWT_PUBLIC_KEY") or None
        if public_key and not public_key.lstrip().startswith("-----BEGIN"):
            try:
                public_key = Path(public_key).read_text()
            except OSError as exc:
                raise ConfigError(f"JWT_PUBLIC_KEY is neither a PEM key nor a readable file: "
                                  f"{exc}") from None
        try:
            skew = float(env.get("JWT_CLOCK_SKEW") or 30)
            refresh = float(env.get("JWT_JWKS_REFRESH_INTERVAL") or 3600)
            timeout = float(env.get("JWT_JWKS_TIMEOUT_MS") or 5000) / 1000
        except ValueError as exc:
            raise ConfigError(f"a JWT_* number does not parse: {exc}") from None
        names = {
            "write-only": env.get("JWT_ROLE_WRITE_ONLY") or "write-only",
            "read-only": env.get("JWT_ROLE_READ_ONLY") or "read-only",
            "read-write": env.get("JWT_ROLE_READ_WRITE") or "read-write",
            "admin": env.get("JWT_ROLE_ADMIN") or "admin",
        }
        settings = cls(
            enabled=True, algorithm=algorithm, secret=env.get("JWT_SECRET") or None,
            public_key=public_key, jwks_url=env.get("JWT_JWKS_URL") or None,
            issuer=env.get("JWT_ISSUER") or None, audience=env.get("JWT_AUDIENCE") or None,
            clock_skew=skew, allow_no_exp=_true(env.get("JWT_ALLOW_NO_EXP")),
            roles_claim=env.get("JWT_ROLES_CLAIM") or "role",
            roles_array_claim=env.get("JWT_ROLES_ARRAY_CLAIM") or "roles",
            role_names=names, jwks_refresh_seconds=refresh, jwks_timeout_seconds=timeout)
        settings.check()
        return settings

    def check(self) -> None:
        asymmetric = self.algorithm in ("RS256", "ES256", "EdDSA")
        if self.algorithm == "HS256" and not self.secret:
            raise ConfigError("JWT_ENABLED with HS256 needs JWT_SECRET")
        if asymmetric and not (self.public_key or self.jwks_url):
            raise ConfigError(f"JWT_ENABLED with {self.algorithm} needs JWT_PUBLIC_KEY or "
                              "JWT_JWKS_URL")
        if self.algorithm == "auto" and not (self.secret or self.public_key or self.jwks_url):
            raise ConfigError("JWT_ALGORITHM=auto needs JWT_SECRET, JWT_PUBLIC_KEY or "
                              "JWT_JWKS_URL")
        if self.public_key and not any(_usable(alg, self.public_key)
                                       for alg in ("RS256", "ES256", "EdDSA")):
            raise ConfigError("JWT_PUBLIC_KEY is not a PEM RSA, EC (P-256) or Ed25519 public key")
        if len(set(self.role_names.values())) != len(self.role_names):
            raise ConfigError("JWT_ROLE_* names must be distinct")


def _usable(algorithm: str, pem: str) -> bool:
    try:
        jwt.algorithms.get_default_algorithms()[algorithm].prepare_key(pem)
    except Exception:
        return False
    return True


def _fetch_jwks(source: str, timeout: float) -> dict[str, Any]:
    """Blocking: run in a worker thread. A URL, or a file path."""
    if source.startswith(("http://", "https://")):
        with urllib.request.urlopen(source, timeout=timeout) as response:
            return json.load(response)  # type: ignore[no-any-return]
    return json.loads(Path(source.removeprefix("file://")).read_text())


class Authenticator:
    def __init__(self, settings: AuthSettings) -> None:
        self.settings = settings
        self._jwks: dict[str | None, jwt.PyJWK] = {}
        self._jwks_at = 0.0
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
        s = self.settings
        assert s.jwks_url is not None
        document = await trio.to_thread.run_sync(_fetch_jwks, s.jwks_url, s.jwks_timeout_seconds)
        keys: dict[str | None, jwt.PyJWK] = {}
        for entry in jwt.PyJWKSet.from_dict(document).keys:
            keys.setdefault(None, entry)  # a token without kid uses the first key
            keys[entry.key_id] = entry
        self._jwks, self._jwks_at = keys, time.monotonic()

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
        if stale or (kid not in self._jwks and age > JWKS_COOLDOWN):
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
        raw = headers.get(b"authorization")
        if raw is None:
            raise HTTPError(401, "Authentication required")
        token = raw.decode("latin-1").strip()
        scheme, _, rest = token.partition(" ")
        if scheme.lower() == "bearer":  # without the prefix, the header is the token
            token = rest.strip()
        if not token:
            raise HTTPError(401, "Empty token")
        claims = await self._verify(token)
        levels = self._levels(claims)
        if not any(needs in GRANTS[level] for level in levels):
            raise HTTPError(403, "Insufficient permissions")
        sub = claims.get("sub")
        return sub if isinstance(sub, str) else None

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
