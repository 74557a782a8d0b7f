"""Compaction in the database: the context engine's results applied in place, never lossy.

The context engine (:mod:`agent_core.context`) works on plain transcripts; this package
gives it a session's transcript with message ids, and applies what it returns: compacted
messages are archived (kept, searchable, restorable), pruned ones keep their original,
and the summary and engine state land on the session — all in one transaction.
"""
