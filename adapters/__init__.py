"""Platform adapters: platform events in as ``InboundMessage``, ``OutboundMessage`` out.

Each platform lives in its own sub-package and imports nothing of Hubbub's but
:mod:`adapters.base`, :mod:`adapters.messages` and the shared helpers beside them (the
reply's document model, renderer skeleton, plain-text renderer and splitter).
"""
