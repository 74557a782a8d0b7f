"""Model Context Protocol servers as tool sources: their specs, their tools, the pool."""
