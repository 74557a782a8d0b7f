"""Model calls: one seam (:class:`ChatModel`), its litellm implementation, error mapping."""

from agent_core.llm.model import ChatModel, ChatResult, Usage

__all__ = ("ChatModel", "ChatResult", "Usage")
