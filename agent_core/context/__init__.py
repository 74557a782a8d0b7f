"""The context engine: keeps a session's transcript within the model's window.

Phases of the built-in compressor, one module each: ``pruning`` (1), ``boundaries`` (2),
``summarizer`` with ``serialization``, ``summary_prompt``, ``identifiers`` and
``fallback`` (3), ``markers`` (4), ``repair`` and ``media`` (5). ``compressor``
orchestrates them; ``preflight`` is the multi-pass compaction before a model call. When
each trigger compacts is decided in ``agent_core.compaction.triggers``.
"""

from agent_core.context.compressor import ContextCompressor
from agent_core.context.engine import ContextEngine
from agent_core.context.markers import find_latest_summary, is_summary_message, summary_message
from agent_core.context.preflight import PreflightResult, post_response_tokens, preflight
from agent_core.context.registry import (
    DEFAULT_ENGINE,
    available_engines,
    create_engine,
    register_engine,
)
from agent_core.context.repair import repair_tool_pairs
from agent_core.context.result import (
    CompressionDecision,
    CompressionOutcome,
    CompressionResult,
    DecisionReason,
    Strategy,
)
from agent_core.context.state import EngineState
from agent_core.context.threshold import compute_threshold_tokens

__all__ = (
    "DEFAULT_ENGINE",
    "CompressionDecision",
    "CompressionOutcome",
    "CompressionResult",
    "ContextCompressor",
    "ContextEngine",
    "DecisionReason",
    "EngineState",
    "PreflightResult",
    "Strategy",
    "available_engines",
    "compute_threshold_tokens",
    "create_engine",
    "find_latest_summary",
    "is_summary_message",
    "post_response_tokens",
    "preflight",
    "register_engine",
    "repair_tool_pairs",
    "summary_message",
)
