"""Summary benchmark: one compaction of a long middle, sequential against concurrent.

A 32k main model with an 8k summary model compacts a 5,000-message chat in one run: the
middle does not fit one summary request, so it is cut into chunks whose summaries are
merged as a tree. The fake provider answers every request after a fixed latency (500 ms
by default), so the wall time is the number of request rounds times that latency; chunk
summaries, and the merges of one round, are sent ``--concurrency`` at a time.

Usage: ``python -m bench.summaries [--messages N] [--latency S] [--concurrency 1 4]``;
prints JSON.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import agent_core  # noqa: F401  (offline tokenizer environment)
from agent_core.config import CompressionSettings, LLMSettings
from agent_core.context.compressor import ContextCompressor
from agent_core.llm.litellm_model import LiteLLMModel
from agent_core.llm.model import Message
from agent_core.tokens import TokenCounter
from bench.machine import machine, speed_probe_ms
from tests.fixtures.llm_server import FakeLLM, LLMServerThread

MAIN_WINDOW = 32_768
SUMMARY_WINDOW = 8_192
NOW = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
_WORDS = (
    "deploy",
    "build",
    "cache",
    "worker",
    "queue",
    "retry",
    "lease",
    "shard",
    "index",
    "query",
    "latency",
    "patch",
    "release",
    "branch",
    "merge",
    "review",
    "config",
    "token",
    "budget",
    "window",
    "summary",
    "archive",
    "thread",
    "channel",
    "reply",
)


def chat(count: int, seed: int = 7) -> list[Message]:
    """A seeded group chat of ``count`` messages of some eighty words each."""
    rng = random.Random(seed)
    messages: list[Message] = [{"role": "system", "content": "You are Hubbub, a helpful bot."}]
    for i in range(count):
        words = " ".join(rng.choice(_WORDS) for _ in range(rng.randint(50, 110)))
        role = "assistant" if i % 5 == 4 else "user"
        messages.append({"role": role, "content": f"#{i} {words} v1.{i % 40}.{i % 7}"})
    return messages


def compact(base_url: str, messages: list[Message], concurrency: int) -> dict[str, Any]:
    """One forced compaction with the given concurrency: calls, chunks and wall time."""

    def model(name: str, window: int) -> LiteLLMModel:
        return LiteLLMModel(
            LLMSettings(
                model=f"openai/{name}", api_base=base_url, api_key="bench", context_length=window
            )
        )

    counter = TokenCounter()
    engine = ContextCompressor(
        CompressionSettings(summary_concurrency=concurrency),
        model=model("main", MAIN_WINDOW),
        summary_model=model("summary", SUMMARY_WINDOW),
        clock=lambda: NOW + timedelta(hours=8),
    )
    started = time.perf_counter()
    result = engine.compress(
        messages, force=True, token_counts=[counter.count_message(m) for m in messages]
    )
    wall = time.perf_counter() - started
    return {
        "concurrency": concurrency,
        "outcome": result.outcome.value,
        "strategy": result.strategy.value if result.strategy else None,
        "archived_messages": len(result.archived_indices),
        "summary_calls": result.summary_calls,
        "max_summary_request_tokens": result.max_summary_request_tokens,
        "wall_seconds": round(wall, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=5_000)
    parser.add_argument("--latency", type=float, default=0.5, help="fake provider seconds")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 4])
    args = parser.parse_args()
    probe = speed_probe_ms()
    server = LLMServerThread(FakeLLM())
    fake = server.start()
    fake.delay = args.latency
    messages = chat(args.messages)
    try:
        runs = [compact(fake.base_url, messages, n) for n in args.concurrency]
    finally:
        server.stop()
    sequential = next((r for r in runs if r["concurrency"] == 1), None)
    for run in runs:
        if sequential is not None:
            run["wall_share_of_sequential"] = round(
                run["wall_seconds"] / sequential["wall_seconds"], 3
            )
    print(
        json.dumps(
            {
                "benchmark": "summaries",
                "machine": machine(probe),
                "main_window": MAIN_WINDOW,
                "summary_window": SUMMARY_WINDOW,
                "messages": args.messages,
                "fake_provider_latency_ms": round(args.latency * 1000),
                "runs": runs,
            },
            indent=2,
        )
    )
    sys.exit(0)


if __name__ == "__main__":
    main()
