"""The turn pipeline and where it runs: Celery workers on Redis, or in-process (embedded)."""
