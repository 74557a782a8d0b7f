"""Durable memory: facts written at once, frozen into prompts as a snapshot."""
