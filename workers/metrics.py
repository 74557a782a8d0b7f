"""Prometheus metrics of the pipeline (served by the gateway and by each worker)."""

from __future__ import annotations

import logging

from prometheus_client import Counter, Histogram, start_http_server

from agent_core.usage import Charge

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
MEDIA = Counter(
    "hubbub_images_total",
    "Images people sent, by what became of them (stored, refused: too large, not an "
    "image, unavailable).",
    ["outcome"],
)
UNSETTLED_SENDS = Counter(
    "hubbub_delivery_unsettled_total",
    "Sends that may or may not have reached the platform, by platform and what became of "
    "them: interrupted (the deliverer died mid-send), settling (a later attempt settles it "
    "safely), settled (settled, the reply is delivered), unknown (never resent; see the "
    "outbox entry).",
    ["platform", "outcome"],
)

# Per tenant, with the tenant as the only label: bounded by the number of tenants.
TENANT_TURNS = Counter(
    "hubbub_tenant_turns_total", "Turns answered or refused, per tenant.", ["tenant"]
)
TENANT_PROMPT_TOKENS = Counter(
    "hubbub_tenant_prompt_tokens_total",
    "Prompt tokens of every model call (main and summary), per tenant.",
    ["tenant"],
)
TENANT_COMPLETION_TOKENS = Counter(
    "hubbub_tenant_completion_tokens_total",
    "Completion tokens of every model call (main and summary), per tenant.",
    ["tenant"],
)
TENANT_COST = Counter(
    "hubbub_tenant_cost_usd_total",
    "What every model call cost in US dollars (unpriced models count 0), per tenant.",
    ["tenant"],
)
TENANT_UNPRICED_CALLS = Counter(
    "hubbub_tenant_unpriced_calls_total",
    "Model calls whose model has no price (litellm's map nor HUBBUB_MODEL_COSTS), per tenant.",
    ["tenant"],
)
TENANT_REFUSALS = Counter(
    "hubbub_tenant_budget_refusals_total",
    "Messages answered with a budget refusal instead of a model call, per tenant.",
    ["tenant"],
)

TENANT_COMPACTIONS_OVER_BUDGET = Counter(
    "hubbub_tenant_compactions_over_budget_total",
    "Compactions skipped because their summary calls would pass a budget, per tenant.",
    ["tenant"],
)


def count_charge(charge: Charge) -> None:
    """Count one usage row as it is written to the ledger."""
    TENANT_PROMPT_TOKENS.labels(charge.tenant_id).inc(charge.prompt_tokens)
    TENANT_COMPLETION_TOKENS.labels(charge.tenant_id).inc(charge.completion_tokens)
    TENANT_COST.labels(charge.tenant_id).inc(charge.cost_usd)
    if not charge.cost_known:
        TENANT_UNPRICED_CALLS.labels(charge.tenant_id).inc()


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
