"""The admin API's domain: scoped API keys and the audit log."""
