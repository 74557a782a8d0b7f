"""Publish Hubbub's chat commands to Telegram's command menu (the ``/`` button).

Telegram has no slash-command API like Discord's or Slack's: commands are plain text, and
``setMyCommands`` only lists them so clients can offer completion.
"""

from __future__ import annotations

import logging

from telegram import Bot, BotCommand
from telegram.error import TelegramError

log = logging.getLogger(__name__)

MENU: tuple[tuple[str, str], ...] = (
    ("help", "What I can do and the commands I know"),
    ("new", "Start a fresh conversation (the old one is kept)"),
    ("usage", "How much of my context window this chat uses"),
    ("compress", "Summarise older messages now, optionally around a topic"),
)


async def publish_commands(bot: Bot) -> None:
    """List the commands in the bot's menu; a failure is logged, never fatal."""
    try:
        await bot.set_my_commands([BotCommand(name, summary) for name, summary in MENU])
    except TelegramError as exc:
        log.warning("could not publish Telegram commands", extra={"error": str(exc)})
