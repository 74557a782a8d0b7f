"""Prometheus metrics of the pipeline (served by the gateway and by each worker)."""

from __future__ import annotations

from prometheus_client import Counter, Histogram

LATENCY_BUCKETS = (0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120)

INBOUND = Counter(
    "hubbub_inbound_messages_total",
    "Messages received from platforms, by outcome (accepted, duplicate, rejected, ignored).",
    ["platform", "outcome"],
)
TURNS = Counter(
    "hubbub_turns_total",
    "Turns finished, by outcome (reply, command, provider_error, config_error).",
    ["outcome"],
)
TURN_SECONDS = Histogram(
    "hubbub_turn_seconds",
    "Wall time of a turn, from taking the message to its reply being delivered.",
    buckets=LATENCY_BUCKETS,
)
TURN_OVERHEAD_SECONDS = Histogram(
    "hubbub_turn_overhead_seconds",
    "Wall time of a turn minus the time spent waiting for the model.",
    buckets=LATENCY_BUCKETS,
)
LLM_SECONDS = Histogram(
    "hubbub_llm_call_seconds",
    "Wall time of model calls, retries included.",
    buckets=LATENCY_BUCKETS,
)
LLM_TOKENS = Counter("hubbub_llm_tokens_total", "Tokens the provider reported, by kind.", ["kind"])
ERRORS = Counter("hubbub_errors_total", "Errors, by kind.", ["kind"])
COMPACTIONS = Counter(
    "hubbub_compactions_total",
    "Compactions applied, by trigger and strategy.",
    ["trigger", "strategy"],
)
DELIVERIES = Counter(
    "hubbub_deliveries_total",
    "Reply delivery attempts, by platform and outcome (sent, retry, failed, unknown).",
    ["platform", "outcome"],
)
UNSETTLED_SENDS = Counter(
    "hubbub_delivery_unsettled_total",
    "Sends that may or may not have reached the platform, by platform and what became of "
    "them: interrupted (the deliverer died mid-send), settling (a later attempt settles it "
    "safely), settled (settled, the reply is delivered), unknown (never resent; see the "
    "outbox entry).",
    ["platform", "outcome"],
)
