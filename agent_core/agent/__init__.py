"""The per-turn agent: :meth:`Agent.run` is the whole loop of one turn."""

from agent_core.agent.loop import Agent, AgentServices
from agent_core.agent.outcome import ModelCall, Stored, TurnEnd, TurnOutcome, TurnRequest

__all__ = ("Agent", "AgentServices", "ModelCall", "Stored", "TurnEnd", "TurnOutcome", "TurnRequest")
