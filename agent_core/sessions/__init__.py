"""Sessions: conversations, their transcripts and their per-session leases."""
