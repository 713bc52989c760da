"""Authentication settings (docs/decisions.md#auth) that refuse to start, before any database."""

from __future__ import annotations

import subprocess
import sys

import pytest

from queen_trio.errors import ConfigError
from queen_trio.settings import AuthSettings
from queen_trio.web.auth import Authenticator

SECRET = "test-secret-with-enough-length-0123456789"


@pytest.mark.parametrize("env", [
    {"JWT_ALGORITHM": "HS256"},
    {"JWT_ALGORITHM": "RS256"},
    {"JWT_ALGORITHM": "HS999", "JWT_SECRET": SECRET},
    {"JWT_ALGORITHM": "RS256", "JWT_PUBLIC_KEY": "-----BEGIN PUBLIC KEY-----\nnope\n-----END PUBLIC KEY-----"},
    {"JWT_ALGORITHM": "RS256", "JWT_PUBLIC_KEY": "/no/such/key.pem"},
    {"JWT_SECRET": SECRET, "JWT_CLOCK_SKEW": "soon"},
])
def test_misconfiguration_refuses_to_start(env):
    with pytest.raises(ConfigError):
        AuthSettings.from_env({"JWT_ENABLED": "true", **env})


def test_auth_is_off_unless_enabled():
    assert AuthSettings.from_env({"JWT_SECRET": SECRET}).enabled is False


async def test_unreachable_jwks_refuses_to_start():
    auth = AuthSettings.from_env({"JWT_ENABLED": "true", "JWT_ALGORITHM": "ES256",
                                  "JWT_JWKS_URL": "http://127.0.0.1:1/jwks.json",
                                  "JWT_JWKS_TIMEOUT_MS": "500"})
    with pytest.raises(ConfigError, match="cannot be read"):
        await Authenticator(auth).start()


def test_boot_errors_name_their_cause(tmp_path):
    # DATABASE_URL names a server that is not there: the configuration error comes first.
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "JWT_ENABLED": "true",
           "JWT_ALGORITHM": "ES256", "JWT_JWKS_URL": "http://127.0.0.1:1/jwks.json",
           "JWT_JWKS_TIMEOUT_MS": "300", "DATABASE_URL": "postgresql://nobody@127.0.0.1:1/x",
           "FILE_BUFFER_DIR": str(tmp_path / "spool")}
    done = subprocess.run([sys.executable, "-m", "queen_trio", "serve", "--port", "1"],
                          env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "configuration error: JWT_JWKS_URL" in done.stderr
    assert "ExceptionGroup" not in done.stderr
