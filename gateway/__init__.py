"""The long-running service: the HTTP app, platform connections and the ``hubbub`` CLI."""
