"""The system prompt: built once per session from three layers, frozen, restored byte for byte."""

from agent_core.prompt.builder import PromptInputs, build_system_prompt
from agent_core.prompt.fingerprint import prompt_fingerprint

__all__ = ("PromptInputs", "build_system_prompt", "prompt_fingerprint")
