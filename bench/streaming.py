"""Streaming benchmark: time to first visible text, edits per reply and 429s, per platform.

One embedded gateway (``hubbub up`` in-process, SQLite) serves one bot; ``--chats``
private chats (default 20) each ask at once, and the fake provider streams every answer
at ``--tokens-per-second`` (default 30; one word is one token). Each fake platform
enforces its flood control and answers anything faster with a 429, so "429s seen" counts
what the default edit interval and the fleet-wide pacing would trip
(:mod:`tests.fixtures.platform_servers.flood`): Telegram 30 calls a second per bot and one
per chat, Discord 5 posts and 5 edits per channel per 5 s, Slack one post or update per
channel per second. The web chat has no platform: its drafts are the page's Server-Sent Events, read
here from ``GET /api/webchat/{id}/events`` as a page would.

Per reply: time from the message being handed to the gateway to the first draft (first
visible text) and to the final formatted text, and how many edits (web chat: drafts)
it took.

Usage: ``python -m bench.streaming [--platforms telegram,slack] [--chats N]
[--tokens-per-second R] [--words W]``; ``--platforms`` picks the rounds to run (default
all: telegram, discord, slack, webchat), in the order given. Prints JSON and stops by
itself (each reply is waited for at most ``--timeout`` seconds).
"""

from __future__ import annotations

import argparse
import json
import json as jsonlib
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

import agent_core  # noqa: F401  (offline tokenizer environment)
from adapters.discord.chunks import render_chunks as discord_chunks
from adapters.slack.chunks import render_chunks as slack_chunks
from adapters.telegram.chunks import render_chunks
from agent_core.db.migrations import upgrade_to_head
from bench.machine import machine, speed_probe_ms
from tests.fixtures.llm_server import FakeLLM, LLMServerThread
from tests.fixtures.platform_servers.discord import DiscordServerThread
from tests.fixtures.platform_servers.discord import load_payload as discord_payload
from tests.fixtures.platform_servers.slack import BOT_TOKEN, SIGNING_SECRET, SlackServerThread, sign
from tests.fixtures.platform_servers.slack import load_payload as slack_payload
from tests.fixtures.platform_servers.telegram import (
    TOKEN,
    FakeTelegram,
    TelegramServerThread,
    parse_telegram_html,
)
from tests.fixtures.services import GatewayServer, hubbub_env, settings_from_env, wait_until

FIRST_CHAT = 5_300_000
FIRST_DISCORD_CHANNEL = 1_390_000_000_000_000_000


ASKER = 1_400_000_000_000_000_000
"""The first Discord user id of the askers, one per chat."""
TEST_ONLY = (
    "HUBBUB_TURN_LEASE_SECONDS",
    "HUBBUB_SWEEP_INTERVAL_SECONDS",
    "HUBBUB_LLM_MAX_RETRIES",
    "HUBBUB_LLM_TIMEOUT",
    "HUBBUB_SHUTDOWN_GRACE_SECONDS",
    "HUBBUB_RATE_LIMIT_USER",
    "HUBBUB_RATE_LIMIT_CHAT",
    "HUBBUB_BUSY_MODE",
    "HUBBUB_STREAMING",
)
"""The test environment's settings (:func:`hubbub_env`) the benchmark drops, so that it
measures a deployment at Hubbub's defaults (streaming on, busy mode ``collect``)."""


def _at_defaults(env: dict[str, str]) -> None:
    for name in TEST_ONLY:
        env.pop(name, None)


def _update(chat: int, number: int) -> dict[str, Any]:
    return {
        "message": {
            "message_id": 100 + number,
            "date": int(time.time()),
            "chat": {"id": chat, "type": "private", "first_name": "Bench"},
            "from": {"id": chat, "is_bot": False, "first_name": "Bench"},
            "text": f"question {number}",
        }
    }


def _shows(fake: FakeTelegram, chat: int, final: str) -> Callable[[], bool]:
    return lambda: fake.messages(chat)[-1:] == [final]


def _last_shown(shown: Callable[[str], list[str]], channel: str, final: str) -> Callable[[], bool]:
    return lambda: shown(channel)[-1:] == [final]


def _percentiles(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {
        "p50": round(statistics.median(ordered), 3),
        "p95": round(ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))], 3),
        "max": round(ordered[-1], 3),
    }


def bench_telegram(
    chats: int, tokens_per_second: float, words: int, timeout: float
) -> dict[str, Any]:
    """Run the Telegram round; the gateway uses the default streaming settings."""
    reply = " ".join(f"word{n}" for n in range(words))
    final = parse_telegram_html(render_chunks(reply)[0].html)[0]
    with (
        tempfile.TemporaryDirectory() as home,
        LLMServerThread() as llm,
        TelegramServerThread() as fake,
    ):
        llm.stream_tokens_per_second = tokens_per_second
        llm.reply = lambda body: reply
        db = Path(home) / "hubbub.db"
        upgrade_to_head(f"sqlite:///{db}")
        env = hubbub_env(
            db_url=f"sqlite:///{db}",
            home=Path(home),
            fake=llm,
            telegram_token=TOKEN,
            telegram_api_base=fake.api_base,
            worker_concurrency=str(chats),
        )
        _at_defaults(env)
        gateway = GatewayServer(settings_from_env(env)).start()
        try:
            wait_until(lambda: fake.calls("getUpdates"), what="polling", timeout=timeout)
            started: dict[int, float] = {}
            for number in range(chats):
                chat = FIRST_CHAT + number
                started[chat] = time.monotonic()
                fake.push_update(_update(chat, number))
            for chat in started:
                wait_until(
                    _shows(fake, chat, final),
                    timeout=timeout,
                    interval=0.1,
                    what=f"the final text in chat {chat}",
                )
        finally:
            gateway.stop()
        first, done, edits, posts = [], [], [], []
        for chat, at in started.items():
            sent = [c for c in fake.calls("sendMessage") if int(c.params["chat_id"]) == chat]
            ok_sent = [c for c in sent if c.params.get("_ok")]
            changed = [
                c
                for c in fake.calls("editMessageText")
                if int(c.params["chat_id"]) == chat and c.params.get("_ok")
            ]
            first.append(ok_sent[0].at - at)
            done.append((changed[-1].at if changed else ok_sent[-1].at) - at)
            edits.append(len(changed))
            posts.append(len(ok_sent))
        return {
            "platform": "telegram",
            "streamed": True,
            "chats": chats,
            "tokens_per_second": tokens_per_second,
            "reply_words": words,
            "edit_interval_seconds": settings_from_env(env).stream_edit_interval,
            "first_visible_seconds": _percentiles(first),
            "final_text_seconds": _percentiles(done),
            "edits_per_reply": _percentiles([float(e) for e in edits]),
            "messages_per_reply": max(posts),
            "rate_limited_429s": fake.rate_limited,
        }


def _row(
    platform: str,
    interval: float,
    args: tuple[int, float, int],
    timings: tuple[list[float], list[float], list[int], list[int]],
    rate_limited: int,
) -> dict[str, Any]:
    chats, tokens_per_second, words = args
    first, done, edits, posts = timings
    return {
        "platform": platform,
        "streamed": True,
        "chats": chats,
        "tokens_per_second": tokens_per_second,
        "reply_words": words,
        "edit_interval_seconds": interval,
        "first_visible_seconds": _percentiles(first),
        "final_text_seconds": _percentiles(done),
        "edits_per_reply": _percentiles([float(e) for e in edits]),
        "messages_per_reply": max(posts),
        "rate_limited_429s": rate_limited,
    }


def _env(home: str, llm: FakeLLM, chats: int, **extra: str) -> dict[str, str]:
    db = Path(home) / "hubbub.db"
    upgrade_to_head(f"sqlite:///{db}")
    env = hubbub_env(
        db_url=f"sqlite:///{db}",
        home=Path(home),
        fake=llm,
        worker_concurrency=str(chats),
        **extra,
    )
    _at_defaults(env)
    return env


def bench_discord(
    chats: int, tokens_per_second: float, words: int, timeout: float
) -> dict[str, Any]:
    """Run the Discord round: one DM channel per chat, the default settings."""
    reply = " ".join(f"word{n}" for n in range(words))
    (final,) = discord_chunks(reply)
    with (
        tempfile.TemporaryDirectory() as home,
        LLMServerThread() as llm,
        DiscordServerThread() as fake,
    ):
        llm.stream_tokens_per_second = tokens_per_second
        llm.reply = lambda body: reply
        channels = [str(FIRST_DISCORD_CHANNEL + n) for n in range(chats)]
        for channel in channels:
            fake.add_dm_channel(channel)
        env = _env(home, llm, chats, discord_token=fake.token, discord_api_base=fake.base_url)
        gateway = GatewayServer(settings_from_env(env)).start()
        try:
            wait_until(fake.connected, what="the Discord gateway", timeout=timeout)
            started: dict[str, float] = {}
            for number, channel in enumerate(channels):
                message = discord_payload("message_create_private")
                message |= {
                    "id": fake.next_id(),
                    "channel_id": channel,
                    "content": f"question {number}",
                    # Twenty people, not one asking twenty times (the per-person turn limit).
                    "author": message["author"] | {"id": str(ASKER + number)},
                }
                started[channel] = time.monotonic()
                fake.push("MESSAGE_CREATE", message)
            for channel in channels:
                wait_until(
                    _last_shown(fake.shown, channel, final),
                    timeout=timeout,
                    interval=0.1,
                    what=f"the final text in channel {channel}",
                )
        finally:
            gateway.stop()
        first, done, edits, posts = [], [], [], []
        for channel, at in started.items():
            sent = fake.sent_messages(channel)
            changed = [e for e in fake.edits if e["channel_id"] == channel and e["ok"]]
            first.append(sent[0].at - at)
            done.append((changed[-1]["at"] if changed else sent[-1].at) - at)
            edits.append(len(changed))
            posts.append(len(sent))
        interval = settings_from_env(env).stream_edit_interval_discord
        return _row(
            "discord",
            interval,
            (chats, tokens_per_second, words),
            (first, done, edits, posts),
            fake.flood.refused,
        )


def bench_slack(chats: int, tokens_per_second: float, words: int, timeout: float) -> dict[str, Any]:
    """Run the Slack round: one DM per chat over the Events API, the default settings."""
    reply = " ".join(f"word{n}" for n in range(words))
    (final,) = [chunk.mrkdwn for chunk in slack_chunks(reply)]
    with (
        tempfile.TemporaryDirectory() as home,
        LLMServerThread() as llm,
        SlackServerThread() as fake,
    ):
        llm.stream_tokens_per_second = tokens_per_second
        llm.reply = lambda body: reply
        env = _env(
            home,
            llm,
            chats,
            slack_bot_token=BOT_TOKEN,
            slack_signing_secret=SIGNING_SECRET,
            slack_api_base=fake.api_base,
        )
        gateway = GatewayServer(settings_from_env(env)).start()
        channels = [f"D0BENCH{n:03d}" for n in range(chats)]
        try:
            started: dict[str, float] = {}
            with httpx.Client(base_url=gateway.base_url, timeout=timeout) as client:
                for number, channel in enumerate(channels):
                    payload = slack_payload("message_im")
                    ts = f"{time.time():.6f}"
                    payload["event_id"] = f"EvBENCH{number}"
                    payload["event"] |= {
                        "channel": channel,
                        "ts": ts,
                        "event_ts": ts,
                        "text": f"question {number}",
                        "user": f"UBENCH{number:03d}",
                    }
                    body = jsonlib.dumps(payload).encode()
                    headers = sign(body) | {"Content-Type": "application/json"}
                    started[channel] = time.monotonic()
                    client.post("/webhooks/slack/default", content=body, headers=headers)
            for channel in channels:
                wait_until(
                    _last_shown(fake.shown, channel, final),
                    timeout=timeout,
                    interval=0.1,
                    what=f"the final text in channel {channel}",
                )
        finally:
            gateway.stop()
        first, done, edits, posts = [], [], [], []
        for channel, at in started.items():
            sent = [
                c
                for c in fake.calls_to("chat.postMessage")
                if c.params.get("channel") == channel and c.answered == "ok"
            ]
            changed = [
                c
                for c in fake.calls_to("chat.update")
                if c.params.get("channel") == channel and c.answered == "ok"
            ]
            first.append(sent[0].at - at)
            done.append((changed[-1].at if changed else sent[-1].at) - at)
            edits.append(len(changed))
            posts.append(len(sent))
        interval = settings_from_env(env).stream_edit_interval_slack
        return _row(
            "slack",
            interval,
            (chats, tokens_per_second, words),
            (first, done, edits, posts),
            fake.flood.refused,
        )


class _PageStream:
    """What one page's event stream shows of one conversation, read in a thread.

    Opened, like the page's, once the conversation has its first line (before, it is not
    found): a draft published before the stream subscribed is missed, so the first visible
    time measured here is, if anything, late.
    """

    def __init__(self, base_url: str, conversation: str, timeout: float) -> None:
        self.conversation = conversation
        self.finished = threading.Event()
        self.drafts: list[float] = []
        self.final_at: float | None = None
        self._url = f"{base_url}/api/webchat/{conversation}/events"
        self._timeout = timeout
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        with (
            httpx.Client(timeout=self._timeout) as client,
            client.stream("GET", self._url) as response,
        ):
            event = ""
            for line in response.iter_lines():
                if line.startswith("event:"):
                    event = line.removeprefix("event:").strip()
                elif line.startswith("data:") and event == "draft":
                    self.drafts.append(time.monotonic())
                elif line.startswith("data:") and event == "message":
                    data = jsonlib.loads(line.removeprefix("data:"))
                    if data.get("role") == "assistant":
                        self.final_at = time.monotonic()
                        self.finished.set()
                        return


def bench_webchat(
    chats: int, tokens_per_second: float, words: int, timeout: float
) -> dict[str, Any]:
    """Run the web chat round: one conversation per chat, each with a page's event stream."""
    reply = " ".join(f"word{n}" for n in range(words))
    with tempfile.TemporaryDirectory() as home, LLMServerThread() as llm:
        llm.stream_tokens_per_second = tokens_per_second
        llm.reply = lambda body: reply
        env = _env(home, llm, chats)
        gateway = GatewayServer(settings_from_env(env)).start()
        try:
            pages: list[_PageStream] = []
            started: dict[str, float] = {}
            with httpx.Client(base_url=gateway.base_url, timeout=timeout) as client:
                for number in range(chats):
                    conversation = f"bench-{number}"
                    started[conversation] = time.monotonic()
                    client.post(
                        f"/api/webchat/{conversation}/messages",
                        # As the page asks: its first message is posted before its stream
                        # can open (a conversation without lines has none).
                        json={"text": f"question {number}", "stream": True},
                    ).raise_for_status()
                    pages.append(_PageStream(gateway.base_url, conversation, timeout))
            for page in pages:
                if not page.finished.wait(timeout):
                    raise TimeoutError(f"no final reply in {page.conversation}")
        finally:
            gateway.stop()
        first, done, drafts = [], [], []
        for page in pages:
            at = started[page.conversation]
            assert page.final_at is not None
            first.append((page.drafts[0] if page.drafts else page.final_at) - at)
            done.append(page.final_at - at)
            drafts.append(len(page.drafts))
        interval = settings_from_env(env).stream_edit_interval_webchat
        row = _row(
            "webchat",
            interval,
            (chats, tokens_per_second, words),
            (first, done, drafts, [1]),
            0,
        )
        row["rate_limited_429s"] = None  # no platform: drafts are the page's own events
        return row


Round = Callable[[int, float, int, float], dict[str, Any]]
ROUNDS: dict[str, Round] = {
    "telegram": bench_telegram,
    "discord": bench_discord,
    "slack": bench_slack,
    "webchat": bench_webchat,
}
"""Each platform's round, in the default order."""


def platform_list(value: str) -> list[str]:
    """``--platforms``: comma-separated round names, in the order given, each once.

    Raises:
        argparse.ArgumentTypeError: a name is not a platform's, or none is given.
    """
    names = [name.strip().lower() for name in value.split(",") if name.strip()]
    unknown = [name for name in names if name not in ROUNDS]
    if not names or unknown:
        raise argparse.ArgumentTypeError(
            f"expected platforms among {', '.join(ROUNDS)}, got {value!r}"
        )
    return list(dict.fromkeys(names))


def main() -> None:
    """Run the chosen platforms (all by default) and print one JSON document."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--platforms",
        type=platform_list,
        default=list(ROUNDS),
        help=f"comma-separated, default all: {','.join(ROUNDS)}",
    )
    parser.add_argument("--chats", type=int, default=20)
    parser.add_argument("--tokens-per-second", type=float, default=30.0)
    parser.add_argument("--words", type=int, default=120, help="words (tokens) per reply")
    parser.add_argument("--timeout", type=float, default=180.0)
    args = parser.parse_args()
    probe = speed_probe_ms()
    results = [
        ROUNDS[name](args.chats, args.tokens_per_second, args.words, args.timeout)
        for name in args.platforms
    ]
    print(
        json.dumps(
            {"benchmark": "streaming", "machine": machine(probe), "results": results},
            indent=2,
        )
    )
    sys.exit(0)


if __name__ == "__main__":
    main()
