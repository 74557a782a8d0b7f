"""Streaming benchmark: time to first visible text, edits per reply and 429s, per platform.

One embedded gateway (``hubbub up`` in-process, SQLite) serves one bot; ``--chats``
private chats (default 20) each ask at once, and the fake provider streams every answer
at ``--tokens-per-second`` (default 30; one word is one token). The fake Bot API enforces
Telegram's flood control on posts and edits (30 a second per bot, one a second per chat:
:mod:`tests.fixtures.platform_servers.flood`) and answers anything faster with a 429, so
"429s seen" counts what the default edit interval and pacing would trip.

Per reply: time from the update being queued to the first draft message (first visible
text) and to the final formatted edit, and how many edits it took. Discord and Slack
deliverers do not stream yet; their rows say so instead of inventing numbers.

Usage: ``python -m bench.streaming [--chats N] [--tokens-per-second R] [--words W]``;
prints JSON and stops by itself (each reply is waited for at most ``--timeout`` seconds).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import agent_core  # noqa: F401  (offline tokenizer environment)
from adapters.telegram.chunks import render_chunks
from agent_core.db.migrations import upgrade_to_head
from bench.machine import machine, speed_probe_ms
from tests.fixtures.llm_server import LLMServerThread
from tests.fixtures.platform_servers.telegram import (
    TOKEN,
    FakeTelegram,
    TelegramServerThread,
    parse_telegram_html,
)
from tests.fixtures.services import GatewayServer, hubbub_env, settings_from_env, wait_until

FIRST_CHAT = 5_300_000


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
        del env["HUBBUB_STREAMING"]  # the deployment's default (on)
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


def main() -> None:
    """Run every platform and print one JSON document."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chats", type=int, default=20)
    parser.add_argument("--tokens-per-second", type=float, default=30.0)
    parser.add_argument("--words", type=int, default=120, help="words (tokens) per reply")
    parser.add_argument("--timeout", type=float, default=180.0)
    args = parser.parse_args()
    probe = speed_probe_ms()
    results = [bench_telegram(args.chats, args.tokens_per_second, args.words, args.timeout)]
    results += [
        {"platform": name, "streamed": False, "reason": "its deliverer does not stream yet"}
        for name in ("discord", "slack")
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
