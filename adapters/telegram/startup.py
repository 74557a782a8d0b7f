"""What a receiving bot does once connected: list its commands, check it can see groups.

Telegram has no slash-command API like Discord's or Slack's: commands are plain text, and
``setMyCommands`` only lists them so clients can offer completion. Bots are created with
"privacy mode" on, which hides ordinary group messages from them; Hubbub then cannot keep
the group's conversation as context, so it says so in the log.
"""

from __future__ import annotations

import logging

from telegram import Bot, BotCommand
from telegram.error import TelegramError

from adapters.base import BotConfig

log = logging.getLogger(__name__)

MENU: tuple[tuple[str, str], ...] = (
    ("help", "What I can do and the commands I know"),
    ("new", "Start a fresh conversation (the old one is kept)"),
    ("usage", "How much of my context window this chat uses"),
    ("compress", "Summarise older messages now, optionally around a topic"),
    ("memory", "What I remember about you in this chat"),
    ("forget", "Forget what I remember about you here"),
    ("stop", "Stop the reply I am writing now"),
    ("model", "List the models, or switch this chat to one"),
)


async def announce(bot: Bot, config: BotConfig) -> None:
    """Publish the command menu and warn about privacy mode; never fails.

    ``bot`` must be initialised (its ``getMe`` result is read).
    """
    if not bot.bot.can_read_all_group_messages:
        log.warning(
            "Telegram privacy mode is on for @%s: in groups it only receives commands, "
            "mentions and replies, so it cannot keep the rest of the conversation as "
            "context. Turn it off with @BotFather (/setprivacy -> Disable) and re-add the "
            "bot to its groups, or make it a group admin.",
            bot.username,
            extra={"bot": config.bot_name},
        )
    await publish_commands(bot)


async def publish_commands(bot: Bot) -> None:
    """List the commands in the bot's menu; a failure is logged, never fatal."""
    try:
        await bot.set_my_commands([BotCommand(name, summary) for name, summary in MENU])
    except TelegramError as exc:
        log.warning("could not publish Telegram commands", extra={"error": str(exc)})
