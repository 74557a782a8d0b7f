"""Keep uvicorn's access log for what matters: the web chat page's polling is left out.

Each open chat tab asks for its messages about once a second; logging every successful
answer would bury the lines an operator reads (errors, webhooks, admin calls).
"""

from __future__ import annotations

import logging
import re

ACCESS_LOGGER = "uvicorn.access"
_POLLED_PATH = re.compile(r"^/api/webchat/[^/?]+/messages(\?.*)?$")
_QUIET_STATUSES = frozenset({200, 204, 304})


class PollingFilter(logging.Filter):
    """Drops successful ``GET /api/webchat/{id}/messages`` lines; failures still show."""

    def filter(self, record: logging.LogRecord) -> bool:
        """False for a record of a successful polling request."""
        args = record.args
        if not isinstance(args, tuple) or len(args) != 5:
            return True
        _client, method, path, _version, status = args
        return not (
            method == "GET"
            and isinstance(path, str)
            and _POLLED_PATH.match(path) is not None
            and status in _QUIET_STATUSES
        )


def quiet_polling() -> None:
    """Install :class:`PollingFilter` on uvicorn's access logger (once)."""
    logger = logging.getLogger(ACCESS_LOGGER)
    if not any(isinstance(f, PollingFilter) for f in logger.filters):
        logger.addFilter(PollingFilter())
