"""Encryption at rest for bot credentials (Fernet: AES-128-CBC + HMAC-SHA256)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from cryptography.fernet import Fernet, InvalidToken

from agent_core.errors import ConfigError

KEY_FILE_NAME = "secret.key"


def load_or_create_key(configured: str | None, home: Path) -> bytes:
    """The configured key, else the one generated under ``home`` on first use (mode 0600)."""
    if configured:
        return configured.encode()
    path = home / KEY_FILE_NAME
    if path.is_file():
        return path.read_bytes().strip()
    home.mkdir(parents=True, exist_ok=True)
    key = Fernet.generate_key()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as handle:
        handle.write(key)
    return key


class CredentialBox:
    """Seals and opens credential dictionaries.

    Raises:
        ConfigError: the key is malformed, or a stored value was sealed with another key.
    """

    def __init__(self, key: bytes) -> None:
        try:
            self._fernet = Fernet(key)
        except ValueError as exc:
            raise ConfigError(
                "HUBBUB_SECRET_KEY is not a valid Fernet key (32 url-safe base64 bytes)"
            ) from exc

    def seal(self, credentials: dict[str, Any]) -> str:
        """Encrypt credentials for storage."""
        return self._fernet.encrypt(json.dumps(credentials).encode()).decode()

    def open(self, sealed: str) -> dict[str, Any]:
        """Decrypt stored credentials."""
        try:
            data = json.loads(self._fernet.decrypt(sealed.encode()))
        except InvalidToken as exc:
            raise ConfigError(
                "stored bot credentials cannot be decrypted: HUBBUB_SECRET_KEY changed?"
            ) from exc
        assert isinstance(data, dict)
        return data
