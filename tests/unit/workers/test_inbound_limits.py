"""Inbound rate limits: a flood from one sender becomes a handful of turns and one notice."""

from __future__ import annotations

import pytest
from limits.storage import MemoryStorage, RedisStorage
from pydantic import ValidationError

from agent_core.config import DEFAULT_RATE_LIMIT_CHAT, DEFAULT_RATE_LIMIT_USER, Settings
from workers import metrics
from workers.inbound_limits import Asker, InboundLimiter, Verdict

ANN = Asker("default", 1, "chat-1", "ann")


def limiter(per_user: str = DEFAULT_RATE_LIMIT_USER, per_chat: str = "") -> InboundLimiter:
    return InboundLimiter(MemoryStorage(), per_user=per_user, per_chat=per_chat)


def test_a_flood_at_the_defaults_asks_for_ten_turns_and_one_notice() -> None:
    defaults = InboundLimiter(
        MemoryStorage(), per_user=DEFAULT_RATE_LIMIT_USER, per_chat=DEFAULT_RATE_LIMIT_CHAT
    )
    verdicts = [defaults.check(ANN) for _ in range(2_000)]
    assert verdicts.count(Verdict.ALLOWED) == 10
    assert verdicts.count(Verdict.LIMITED_TELL) == 1
    assert verdicts[10] is Verdict.LIMITED_TELL, "told at the first message over the limit"


def test_senders_are_counted_apart_and_the_chat_limit_covers_them_all() -> None:
    shared = limiter(per_user="3/hour", per_chat="5/hour")
    ann = [shared.check(ANN) for _ in range(4)]
    bob = [shared.check(Asker("default", 1, "chat-1", "bob")) for _ in range(4)]
    assert ann == [Verdict.ALLOWED] * 3 + [Verdict.LIMITED_TELL]
    # Bob is within his own limit, but the chat has had five turns asked (Ann's fourth
    # counted against it too) after his first.
    assert bob == [Verdict.ALLOWED, Verdict.LIMITED_TELL, Verdict.LIMITED, Verdict.LIMITED]


def test_other_bots_and_tenants_have_their_own_counters() -> None:
    shared = limiter(per_user="1/hour")
    assert shared.check(ANN) is Verdict.ALLOWED
    assert shared.check(Asker("default", 2, "chat-1", "ann")) is Verdict.ALLOWED
    assert shared.check(Asker("acme", 1, "chat-1", "ann")) is Verdict.ALLOWED
    assert shared.check(ANN) is Verdict.LIMITED_TELL


def test_a_store_that_is_down_lets_messages_through_and_is_counted() -> None:
    dead = RedisStorage("redis://127.0.0.1:9/0", socket_timeout=0.2, socket_connect_timeout=0.2)
    down = InboundLimiter(dead, per_user="1/hour", per_chat="")
    before = metrics.RATE_LIMIT_ERRORS._value.get()
    assert [down.check(ANN) for _ in range(3)] == [Verdict.ALLOWED] * 3
    assert metrics.RATE_LIMIT_ERRORS._value.get() == before + 3


def test_off_turns_a_limit_off_and_nonsense_is_a_named_setting_error() -> None:
    settings = Settings(rate_limit_user="off", rate_limit_chat="")
    assert InboundLimiter.from_settings(settings) is None
    with pytest.raises(ValidationError, match="rate_limit_user") as error:
        Settings(rate_limit_user="lots")
    assert "10/minute;100/hour" in str(error.value)
