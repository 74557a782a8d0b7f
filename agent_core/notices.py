"""Every text Hubbub itself tells a user: failures, compaction warnings, ``/compress`` reports."""

from __future__ import annotations

from agent_core.compaction.runner import CompactionReport, RunStatus
from agent_core.context import CompressionOutcome
from agent_core.errors import (
    ContextOverflow,
    EndpointNotFound,
    MissingApiKey,
    ModelNotFound,
    ProviderAuthError,
    ProviderConfigError,
    ProviderError,
    ProviderRateLimited,
    ProviderUnavailable,
    ProviderUnreachable,
)


def misconfigured(error: Exception) -> str:
    """What a turn says when a setting makes every turn fail (the error names the fix)."""
    return f"I cannot answer until the operator fixes a setting: {error}."


NO_MODEL = (
    "No model is configured, so I cannot answer yet. The operator needs to set HUBBUB_MODEL "
    "(any litellm model string, e.g. openai/gpt-4o-mini) and the provider's API key "
    "(HUBBUB_LLM_API_KEY or the provider's usual variable), then restart Hubbub."
)
OVERFLOW_DISABLED = (
    "This conversation no longer fits the model's context window, and automatic compaction "
    "is turned off here, so nothing was compacted. Use /compress to summarise older turns, "
    "/new to start a fresh session, or switch to a model with a larger window."
)
OVERFLOW_STUCK = (
    "This conversation no longer fits the model's context window, and nothing more of it "
    "can be compacted. Use /new to start a fresh session (this one is kept), or switch to "
    "a model with a larger window."
)
INEFFECTIVE = (
    "Automatic compaction has stopped: the last compactions saved too little. Use "
    "/compress <topic> to summarise with a focus, or /new to start a fresh session."
)
RATE_LIMITED = (
    "You are sending messages faster than I can answer, so I will read the next ones "
    "without replying for a little while. Ask again in a minute and I will answer."
)
SUMMARY_PREVIEW_LINES = 6


def step_limit(calls: int) -> str:
    """Shown above a reply the model had to give without finishing its tool work."""
    return (
        f"⚠️ I stopped using tools after {calls} steps (the limit for one answer), so this "
        "answer may be incomplete. Ask me to continue if you need more."
    )


TIMEOUT_STATUS = 408
"""The status litellm gives a call the provider did not answer in time."""


def provider_notice(error: ProviderError) -> str:
    """The short reply a user sees when the model call failed.

    A configuration error says what the operator has to set, since waiting will not help;
    a passing failure asks to try again.
    """
    if isinstance(error, ContextOverflow):
        reason = "the conversation no longer fits the model's context window"
    elif isinstance(error, MissingApiKey):
        reason = "no API key is configured for the model provider"
    elif isinstance(error, ProviderAuthError):
        reason = "the model provider refused the API key"
    elif isinstance(error, ModelNotFound):
        reason = f"the model provider does not know the model {error.model}"
    elif isinstance(error, EndpointNotFound):
        reason = "the configured model server has no chat API at that address"
    elif isinstance(error, ProviderUnreachable):
        reason = "the configured model server does not answer"
    elif isinstance(error, ProviderConfigError):
        reason = "the model is not configured correctly"
    elif isinstance(error, ProviderRateLimited):
        reason = "the model provider is rate-limiting us"
    elif isinstance(error, ProviderUnavailable) and error.status_code == TIMEOUT_STATUS:
        reason = "the model provider is unavailable right now (no answer within the timeout)"
    elif isinstance(error, ProviderUnavailable):
        reason = "the model provider is unavailable right now"
    else:
        reason = "the model provider rejected the request"
    which = error.model
    if len(error.tried) > 1:
        which += f" (and its fallback {', '.join(error.tried[1:])}, which failed too)"
    if isinstance(error, ProviderConfigError) and error.fix:
        return (
            f"Sorry, I could not answer with {which}: {reason}. This is a configuration "
            f"problem: the operator needs to {error.fix}, then restart Hubbub."
        )
    if error.fix:
        return (
            f"Sorry, I could not answer with {which}: {reason}. The operator needs to "
            f"{error.fix}; then try again."
        )
    return f"Sorry, I could not answer with {which}: {reason}. Please try again in a moment."


def aborted_compaction(report: CompactionReport) -> str:
    """The one-line warning shown when a compaction stopped with nothing dropped."""
    reason = report.result.detail if report.result is not None else ""
    return (
        f"⚠️ Compacting this conversation failed ({reason or 'summary model unavailable'}); "
        "nothing was dropped. Use /compress to try again."
    )


def manual_compaction(report: CompactionReport) -> str:
    """What ``/compress`` tells the user: strategy, tokens before and after, summary start."""
    result = report.result
    if report.status is RunStatus.BUSY:
        return "Another compaction of this conversation is running; try again in a moment."
    if report.status is RunStatus.LOCK_ERROR:
        return "Compaction is unavailable right now (the database is not answering)."
    if report.status is RunStatus.NO_MODEL:
        return NO_MODEL
    if report.status is RunStatus.OVER_BUDGET and report.refusal:
        return report.refusal
    if result is None or not report.applied:
        if report.aborted:
            return aborted_compaction(report)
        if result is not None and result.outcome is CompressionOutcome.NOTHING_TO_COMPRESS:
            return (
                "Nothing to compress yet: the whole conversation is in the protected recent turns."
            )
        detail = result.detail if result is not None else ""
        return f"Nothing was compressed ({detail or report.outcome})."
    body = (result.summary or "").strip().splitlines()
    preview = "\n".join(line for line in body if line.strip())
    preview_lines = "\n".join(preview.splitlines()[:SUMMARY_PREVIEW_LINES])
    saved = result.tokens_before - result.tokens_after
    fallback = " (deterministic digest: the summary model failed)" if result.fallback_used else ""
    return (
        f"Compressed {len(result.archived_indices)} messages with {result.strategy}{fallback}: "
        f"{result.tokens_before:,} → {result.tokens_after:,} tokens ({saved:,} saved). "
        f"The originals are archived.\n\nSummary:\n{preview_lines}"
    )
