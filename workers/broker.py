"""Celery on the Redis broker: the app factory (at-least-once) and its dispatcher.

Tasks are sent by name, so senders (the gateway) need no task code.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from celery import Celery
from celery.app.amqp import AMQP
from kombu.connection import Connection
from kombu.transport import redis as kombu_redis

from agent_core import tracing
from agent_core.config import Settings

QUEUE = "hubbub"
DRAIN_TASK = "hubbub.drain_session"
DELIVER_TASK = "hubbub.deliver_reply"
COMPACT_TASK = "hubbub.compact_session"


class RedisChannel(kombu_redis.Channel):
    """kombu's Redis channel, keeping one synchronous client on its connection pool.

    kombu builds a new ``redis.Redis`` for every publish and every ack; since redis-py 5
    that construction (its response-callback table) costs more than the round trip
    itself, about a millisecond of CPU per task on a small machine. The client only
    wraps the channel's thread-safe pool, so one serves every caller; it is rebuilt
    when kombu replaces the pool (after a fork or a reconnect).
    """

    _sync_client: Any = None

    def _create_client(self, asynchronous: bool = False) -> Any:
        if asynchronous:
            return super()._create_client(asynchronous=True)  # type: ignore[no-untyped-call]
        client = self._sync_client
        if client is None or client.connection_pool is not self.pool:
            client = self._sync_client = super()._create_client()  # type: ignore[no-untyped-call]
        return client


class RedisTransport(kombu_redis.Transport):
    """The stock Redis transport with :class:`RedisChannel`."""

    Channel = RedisChannel


class BrokerConnection(Connection):
    """kombu's connection, whose transport still knows the broker after ``collect()``.

    When a worker loses the broker, Celery 5.7 (``Consumer.on_connection_error_after_
    connected``) first ``collect()``s the connection, which detaches its transport
    (``transport.client = None``), and then ``close()``s it. A Redis channel whose first
    close was cut short by the dead socket is closed again then: it drops its pool and
    restores its unacknowledged messages through a new one, built from
    ``transport.client.hostname``: an ``AttributeError`` that Celery treats as
    unrecoverable, so the worker stopped. Keeping the transport's link to this connection
    lets that restore reach the broker; the transport itself is still let go. Every
    Redis transport (ours, kombu's own for TLS and Sentinel) goes through here.
    """

    def _do_close_transport(self) -> None:
        self._transport = None


class BrokerAMQP(AMQP):  # type: ignore[misc]
    """Celery's AMQP helpers, opening :class:`BrokerConnection` connections."""

    Connection = BrokerConnection


def _transport_for(broker_url: str | None) -> type[RedisTransport] | None:
    """Our transport for plain ``redis://`` URLs; kombu's own for TLS and Sentinel."""
    return RedisTransport if urlsplit(broker_url or "").scheme == "redis" else None


def create_celery(settings: Settings) -> Celery:
    """A Celery app configured so no task is lost when a worker dies.

    Late acks and reject-on-worker-lost requeue a task whose worker died; prefetch 1
    keeps a busy worker from hoarding tasks; the visibility timeout is longer than the
    longest turn so Redis does not hand a running task to a second worker.
    """
    app = Celery("hubbub", broker=settings.redis_url, include=["workers.tasks"], amqp=BrokerAMQP)
    app.conf.update(
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        task_acks_on_failure_or_timeout=True,
        worker_prefetch_multiplier=1,
        broker_transport_options={"visibility_timeout": settings.visibility_timeout_seconds},
        broker_connection_retry_on_startup=True,
        broker_transport=_transport_for(settings.redis_url),
        task_ignore_result=True,
        task_serializer="json",
        accept_content=["json"],
        task_default_queue=QUEUE,
        worker_hijack_root_logger=False,
        worker_redirect_stdouts=False,
        worker_pool="threads",
        worker_concurrency=settings.worker_concurrency,
        worker_send_task_events=False,
        # A turn running when the broker connection drops finishes and delivers its reply;
        # its redelivered task finds the message answered.
        worker_cancel_long_running_tasks_on_connection_loss=False,
        enable_utc=True,
    )
    return app


class CeleryDispatcher:
    """Sends drain and delivery tasks to the Redis broker."""

    def __init__(self, app: Celery) -> None:
        self._app = app

    def kick_session(self, session_id: str) -> None:
        """Queue a drain of the session."""
        self._app.send_task(DRAIN_TASK, args=[session_id], queue=QUEUE)

    def kick_delivery(self, outbox_id: int) -> None:
        """Queue a delivery attempt."""
        self._app.send_task(DELIVER_TASK, args=[outbox_id], queue=QUEUE)

    def kick_compaction(self, session_id: str, trigger: str = "background") -> None:
        """Queue a compaction of the session off the reply path.

        With tracing on, the task's ``traceparent`` header names the span that asked for it
        (a turn, or a message's intake): the compaction's own trace links back to it.
        """
        traceparent = tracing.traceparent()
        headers = {tracing.TRACEPARENT: traceparent} if traceparent is not None else None
        self._app.send_task(COMPACT_TASK, args=[session_id, trigger], queue=QUEUE, headers=headers)
