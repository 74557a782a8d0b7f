"""The private servers that fault tests restart behave like the real thing."""

from __future__ import annotations

import pytest
import redis
from sqlalchemy import create_engine, text
from sqlalchemy.exc import OperationalError

from tests.fixtures.restartable import PrivatePostgres, PrivateRedis

pytestmark = pytest.mark.integration


def test_private_redis_comes_back_empty_on_the_same_url(private_redis: PrivateRedis) -> None:
    client = redis.Redis.from_url(private_redis.url)
    client.set("k", "v")
    private_redis.stop()
    with pytest.raises(redis.ConnectionError):
        client.get("k")
    private_redis.start()
    assert client.get("k") is None
    client.close()


def test_private_postgres_keeps_committed_rows_through_a_crash(
    private_postgres: PrivatePostgres,
) -> None:
    engine = create_engine(private_postgres.url, pool_pre_ping=True)
    with engine.begin() as conn:
        conn.execute(text("create table t (n int)"))
        conn.execute(text("insert into t values (1)"))
    private_postgres.stop("immediate")
    with pytest.raises(OperationalError), engine.connect() as conn:
        conn.execute(text("select 1"))
    private_postgres.start()
    with engine.connect() as conn:
        assert conn.execute(text("select n from t")).scalar_one() == 1
    engine.dispose()
