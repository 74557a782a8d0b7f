"""Platform adapters: platform events in as ``InboundMessage``, ``OutboundMessage`` out.

Each platform lives in its own sub-package and imports nothing of Hubbub's but
:mod:`adapters.base` and :mod:`adapters.messages`.
"""
