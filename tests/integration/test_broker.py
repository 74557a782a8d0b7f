"""The Celery app's Redis transport: one client per channel, rebuilt with its pool."""

from __future__ import annotations

from agent_core.config import Settings
from workers.broker import QUEUE, BrokerConnection, RedisChannel, RedisTransport, create_celery


def test_plain_redis_urls_use_the_client_keeping_transport(redis_url: str) -> None:
    app = create_celery(Settings(redis_url=redis_url))
    with app.connection_for_write() as connection:
        assert isinstance(connection.transport, RedisTransport)
        channel = connection.default_channel
        assert isinstance(channel, RedisChannel)
        first = channel._create_client()
        assert channel._create_client() is first


def test_tls_and_sentinel_urls_keep_kombus_own_transport() -> None:
    for url in ("rediss://127.0.0.1:6380/0", "sentinel://127.0.0.1:26379/0"):
        app = create_celery(Settings(redis_url=url))
        assert app.conf.broker_transport is None


def test_every_broker_url_gets_connections_that_outlive_collect() -> None:
    for url in (
        "redis://127.0.0.1:6379/0",
        "rediss://127.0.0.1:6380/0",
        "sentinel://127.0.0.1:26379/0",
    ):
        app = create_celery(Settings(redis_url=url))
        assert isinstance(app.connection_for_read(), BrokerConnection)
        assert isinstance(app.connection_for_write(), BrokerConnection)


def test_a_replaced_pool_gets_a_new_client(redis_url: str) -> None:
    app = create_celery(Settings(redis_url=redis_url))
    with app.connection_for_write() as connection:
        channel = connection.default_channel
        before = channel._create_client()
        channel._disconnect_pools()  # what kombu does after a fork
        after = channel._create_client()
        assert after is not before
        assert after.connection_pool is channel.pool
        assert after.ping()


def test_published_tasks_are_queued_and_acked_through_the_shared_client(redis_url: str) -> None:
    app = create_celery(Settings(redis_url=redis_url))
    for n in range(3):
        app.send_task("hubbub.deliver_reply", args=[n], queue=QUEUE)
    with app.connection_for_write() as connection:
        channel = connection.default_channel
        client = channel._create_client()
        assert client.llen(QUEUE) == 3
        received = []
        for _ in range(3):
            message = channel.basic_get(QUEUE)
            assert message is not None
            received.append(message.payload)
            message.ack()
        assert client.llen(QUEUE) == 0
        assert client.hlen(channel.unacked_key) == 0
        assert channel._create_client() is client
    assert [body[0][0] for body in received] == [0, 1, 2]
