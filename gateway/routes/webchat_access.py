"""Who may use the web chat: loopback clients (``local``), or browsers by cookie (``public``).

In ``public`` mode a browser gets a random id on its first post, in a signed ``HttpOnly``
cookie. Its conversations are stored under that id (``{browser}.{conversation}``), so a
conversation id alone opens nothing: another browser's conversation is simply not found.
The browser id is also the speaker: the ``user`` field is only a display name, and cannot
pass an allowlist.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import ipaddress
import secrets
from dataclasses import dataclass

from fastapi import HTTPException, Request, Response

from agent_core.config import Settings

COOKIE_NAME = "hubbub_webchat"
COOKIE_PATH = "/api/webchat"
COOKIE_KEY_CONTEXT = b"hubbub webchat cookie v1"
"""Derives the cookie key from the deployment's secret key when none is configured."""
BROWSER_ID_BYTES = 16
LOCAL_HOST_NAMES = frozenset({"localhost"})


def _is_loopback(host: str | None) -> bool:
    if host is None:
        return False
    if host.lower() in LOCAL_HOST_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def only_loopback(request: Request) -> None:
    """``local`` mode: answer loopback clients that asked for a loopback host, else 404.

    The ``Host`` check keeps a web page that rebinds its own name to 127.0.0.1 (DNS
    rebinding) from reading the chat through the visitor's browser.

    Raises:
        HTTPException: 404, as if the web chat did not exist.
    """
    peer = request.client.host if request.client else None
    if not (_is_loopback(peer) and _is_loopback(request.url.hostname)):
        raise HTTPException(status_code=404, detail="Not Found")


@dataclass(frozen=True, slots=True)
class Browser:
    """Who is asking. ``id`` is ``None`` in ``local`` mode (the page names the speaker)."""

    id: str | None
    fresh: bool = False
    """The id was made for this request: the response sets the cookie."""

    def chat_id(self, conversation_id: str) -> str:
        """The stored chat id: a public browser's conversations live under its id."""
        return conversation_id if self.id is None else f"{self.id}.{conversation_id}"


class BrowserCookies:
    """Signs and checks the public web chat cookie (HMAC-SHA256 over the browser id)."""

    def __init__(self, key: bytes, *, max_age_seconds: int, https: bool = False) -> None:
        self._key = key
        self._max_age = max_age_seconds
        self._https = https

    @classmethod
    def for_settings(cls, settings: Settings, secret_key: bytes) -> BrowserCookies:
        """``HUBBUB_WEBCHAT_SECRET``, else a key derived from the deployment's secret key."""
        if settings.webchat_secret is not None:
            key = settings.webchat_secret.get_secret_value().encode()
        else:
            key = hmac.new(secret_key, COOKIE_KEY_CONTEXT, hashlib.sha256).digest()
        return cls(
            key,
            max_age_seconds=settings.webchat_cookie_days * 86_400,
            https=(settings.public_url or "").startswith("https://"),
        )

    def _signature(self, browser_id: str) -> str:
        mac = hmac.new(self._key, browser_id.encode(), hashlib.sha256).digest()
        return base64.urlsafe_b64encode(mac).rstrip(b"=").decode()

    def browser(self, request: Request, *, mint: bool) -> Browser | None:
        """The browser of a validly signed cookie; else a new one if ``mint``, or ``None``."""
        value = request.cookies.get(COOKIE_NAME, "")
        browser_id, _, signature = value.partition(".")
        if browser_id and hmac.compare_digest(signature, self._signature(browser_id)):
            return Browser(browser_id)
        if not mint:
            return None
        return Browser(secrets.token_urlsafe(BROWSER_ID_BYTES), fresh=True)

    def set_cookie(self, response: Response, request: Request, browser: Browser) -> None:
        """Give a freshly made browser id to the browser (HttpOnly, SameSite=Lax).

        ``Secure`` when the request came over HTTPS, or the public URL is HTTPS (a proxy
        in front terminates TLS).
        """
        assert browser.id is not None, "only public browsers carry a cookie"
        response.set_cookie(
            COOKIE_NAME,
            f"{browser.id}.{self._signature(browser.id)}",
            max_age=self._max_age,
            path=COOKIE_PATH,
            httponly=True,
            samesite="lax",
            secure=self._https or request.url.scheme == "https",
        )
