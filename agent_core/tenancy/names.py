"""The one rule for tenant ids and bot names.

Both end up in webhook paths: a default-tenant bot is ``/webhooks/{platform}/{name}``, any
other tenant's ``/webhooks/{platform}/{tenant}.{name}``. A name with a dot could take over
another tenant's path (a default bot named ``acme.support`` would answer for tenant
``acme``'s bot ``support``), one with a slash would not be a single path segment at all. So
names are 1-64 ASCII letters, digits, ``-`` and ``_``, starting with a letter or digit: no
dot, so no two bots can share a path.
"""

from __future__ import annotations

import re

from agent_core.errors import InvalidInput

NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}", re.ASCII)
NAME_RULE = "1-64 ASCII letters, digits, '-' and '_', starting with a letter or digit"


def is_valid_name(name: str) -> bool:
    """Whether ``name`` may be a tenant id or a bot name."""
    return NAME_PATTERN.fullmatch(name) is not None


def check_name(kind: str, name: str) -> None:
    """Refuse a tenant id or bot name that breaks the rule.

    Raises:
        InvalidInput: ``name`` breaks the rule; the message says what ``kind`` of name it is.
    """
    if not is_valid_name(name):
        raise InvalidInput(f"{kind} {name!r} is not valid: use {NAME_RULE}")
