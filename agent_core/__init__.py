"""Hubbub's domain: sessions, tokens, prompts, the context engine and model calls.

``agent_core`` knows nothing of platforms, HTTP or Celery and can be used as a library.
"""

from agent_core._offline import configure_offline_environment

configure_offline_environment()
