"""Prometheus metrics of the pipeline (served by the gateway and by each worker)."""

from __future__ import annotations

import logging

from prometheus_client import Counter, Histogram, start_http_server

log = logging.getLogger(__name__)

LATENCY_BUCKETS = (0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120)

RATE_LIMIT_ERRORS = Counter(
    "hubbub_rate_limit_errors_total",
    "Inbound rate-limit checks that could not reach their store (the message went through).",
)
INBOUND = Counter(
    "hubbub_inbound_messages_total",
    "Messages received from platforms, by outcome (accepted, duplicate, rejected, ignored, "
    "rate_limited: stored, but over a sender's or chat's turn limit).",
    ["platform", "outcome"],
)
TURNS = Counter(
    "hubbub_turns_total",
    "Turns finished, by outcome (reply, command, provider_error, config_error, rate_limited).",
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


def serve(port: int, host: str) -> bool:
    """Serve /metrics on ``port``; a port already taken is a warning, not a failure.

    Two workers on one host with the same ``HUBBUB_WORKER_METRICS_PORT`` both run; only
    the first serves metrics there.
    """
    try:
        start_http_server(port, addr=host)
    except OSError as exc:
        log.warning(
            "worker metrics not served: port %s on %s is unavailable (%s); set "
            "HUBBUB_WORKER_METRICS_PORT to a free port for each worker, or 0 to turn it off",
            port,
            host,
            exc.strerror or exc,
            extra={"port": port},
        )
        return False
    return True
