"""The context engine wired into the pipeline, on SQLite and Postgres.

A small window (8,192 tokens, 1,024 reserved for output) makes compaction happen within
a few dozen messages; the fake provider reports ``prompt_tokens`` and can refuse
oversized prompts or fail summary calls.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import select

from adapters.messages import InboundMessage
from agent_core.compaction.repository import CompactionRepository
from agent_core.compaction.service import restore_latest
from agent_core.compaction.triggers import Trigger
from agent_core.context.markers import SUMMARY_END_MARKER, SUMMARY_PREFIX
from agent_core.db.engine import transaction
from agent_core.db.models import ChatSession, Compaction, Message
from tests.fixtures import services
from tests.fixtures.llm_server import Failure, FakeLLM, is_summary_request
from tests.fixtures.services import (
    GatewayServer,
    conversation,
    hubbub_env,
    post_accepted,
    replies,
    settings_from_env,
    wait_until,
)

pytestmark = pytest.mark.integration

WINDOW = 8192
OUTPUT = 1024
SENTENCE = "The deploy of build {i} to staging finished; Alice checked /var/log/app{i}.log. "


def chatter(i: int) -> str:
    return (SENTENCE.format(i=i) * 6).strip()


@pytest.fixture
def env(db_url: str, fake_llm: FakeLLM, tmp_path: Path) -> dict[str, str]:
    return hubbub_env(
        db_url=db_url,
        home=tmp_path,
        fake=fake_llm,
        context_length=WINDOW,
        max_output_tokens=OUTPUT,
    )


@pytest.fixture
def gateway(env: dict[str, str], gateway_factory: Callable[..., GatewayServer]) -> GatewayServer:
    return gateway_factory(settings_from_env(env))


def group_message(
    gateway: GatewayServer, i: int, text: str, *, addressed: bool = False, chat: str = "g1"
) -> Any:
    return gateway.runtime.intake.accept(
        InboundMessage(
            platform="webchat",
            chat_id=chat,
            chat_type="group",
            message_id=f"{chat}-{i}",
            sender_id=f"u{i % 3}",
            sender_name=["Alice", "Bob", "Chen"][i % 3],
            text=text,
            addressed=addressed,
        )
    )


def chat_requests(fake: FakeLLM) -> list[dict[str, Any]]:
    return [r for r in fake.chat_requests() if not is_summary_request(r)]


def compactions(gateway: GatewayServer) -> list[Compaction]:
    with transaction(gateway.runtime.factory) as db:
        return list(db.scalars(select(Compaction).order_by(Compaction.id)))


def session_of(gateway: GatewayServer, message_id: int) -> ChatSession:
    with transaction(gateway.runtime.factory) as db:
        message = db.get(Message, message_id)
        assert message is not None
        chat_session = db.get(ChatSession, message.session_id)
        assert chat_session is not None
        return chat_session


# Turns here may wait for a compaction: give replies longer than the default.
wait_replies = partial(services.wait_replies, timeout=60)


class TestLongGroupThread:
    def test_a_thread_the_bot_answered_in_stays_compactable(
        self, gateway: GatewayServer, fake_llm: FakeLLM
    ) -> None:
        for i in range(5):  # the head protects the first messages; the answer comes later
            group_message(gateway, i, chatter(i))
        question = group_message(gateway, 5, "@bot how do I restart nginx?", addressed=True)
        wait_until(lambda: chat_requests(fake_llm), timeout=60, what="the evening answer")
        wait_until(
            lambda: session_of(gateway, question.message_id).active_count == 7,
            what="the stored answer",
        )
        for i in range(6, 120):
            group_message(gateway, i, chatter(i))
        wait_until(lambda: compactions(gateway), timeout=60, what="a background compaction")
        group_message(gateway, 120, "@bot and the logs?", addressed=True)
        wait_until(lambda: len(chat_requests(fake_llm)) == 2, timeout=60, what="the question")
        messages = chat_requests(fake_llm)[1]["messages"]
        contents = [str(m["content"]) for m in messages]
        summary_at = next(i for i, c in enumerate(contents) if SUMMARY_PREFIX in c)
        answer_at = contents.index("echo: [Chen] @bot how do I restart nginx?")
        assert summary_at < answer_at, "the old answer is kept verbatim after the summary"
        assert contents[-1] == "[Alice] @bot and the logs?"
        # The prompt sent fits the window (read from the request itself: the session row is
        # updated only once the reply is stored, which may still be under way).
        assert fake_llm.counter.count_messages(messages) < WINDOW - OUTPUT

    def test_overnight_chatter_is_compacted_off_the_reply_path(
        self, gateway: GatewayServer, client: httpx.Client, fake_llm: FakeLLM
    ) -> None:
        for i in range(60):
            group_message(gateway, i, chatter(i))
        wait_until(lambda: compactions(gateway), timeout=60, what="a background compaction")
        assert chat_requests(fake_llm) == [], "nobody asked: no chat turn ran"
        assert {c.trigger for c in compactions(gateway)} == {Trigger.BACKGROUND}

        accepted = group_message(gateway, 60, "@bot what did Alice check?", addressed=True)
        wait_until(lambda: chat_requests(fake_llm), timeout=60, what="the morning turn")
        (request,) = chat_requests(fake_llm)
        summaries = [m for m in request["messages"] if SUMMARY_PREFIX in str(m["content"])]
        assert len(summaries) == 1
        assert SUMMARY_END_MARKER in summaries[0]["content"]
        assert request["messages"][-1]["content"].endswith("what did Alice check?")
        chat_session = session_of(gateway, accepted.message_id)
        assert chat_session.last_prompt_tokens < WINDOW - OUTPUT
        assert chat_session.summary is not None

    def test_nothing_is_lost_and_the_archive_is_searchable(
        self, gateway: GatewayServer, fake_llm: FakeLLM
    ) -> None:
        for i in range(60):
            accepted = group_message(gateway, i, chatter(i))
        wait_until(lambda: compactions(gateway), timeout=60, what="a compaction")
        chat_session = session_of(gateway, accepted.message_id)
        with transaction(gateway.runtime.factory) as db:
            repo = CompactionRepository.from_session(db)
            archived = repo.archived(chat_session.id)
            total = db.scalars(select(Message).where(Message.session_id == chat_session.id)).all()
            assert archived, "compacted turns are archived, not deleted"
            assert len(total) == 60
            found = repo.search_archive(chat_session.id, "/var/log/app10.log")
            assert [m.platform_message_id for m in found] == ["g1-10"]

    def test_system_prompt_is_identical_between_compactions(
        self, client: httpx.Client, fake_llm: FakeLLM
    ) -> None:
        for i in range(6):
            post_accepted(client, "steady", f"question {i}")
            wait_replies(client, "steady", i + 1)
        prompts = {r["messages"][0]["content"] for r in chat_requests(fake_llm)}
        assert len(prompts) == 1


class TestQuietSessions:
    @pytest.fixture
    def gateway(
        self,
        db_url: str,
        tmp_path: Path,
        fake_llm: FakeLLM,
        gateway_factory: Callable[..., GatewayServer],
    ) -> GatewayServer:
        """A gateway that compacts a session one second after it goes quiet."""
        env = hubbub_env(
            db_url=db_url,
            home=tmp_path,
            fake=fake_llm,
            context_length=WINDOW,
            max_output_tokens=OUTPUT,
            compression_idle_seconds="1",
        )
        return gateway_factory(settings_from_env(env))

    def test_a_quiet_session_that_grew_is_compacted_down_once(self, gateway: GatewayServer) -> None:
        for i in range(42):  # over the idle line, under the background line
            group_message(gateway, i, chatter(i), chat="quiet")
        assert compactions(gateway) == []
        (compaction,) = wait_until(lambda: compactions(gateway), timeout=30, what="idle")
        assert compaction.trigger == Trigger.IDLE
        time.sleep(1.5)  # several more sweeps
        assert len(compactions(gateway)) == 1

    def test_messages_stored_during_a_compaction_are_compacted_once_it_is_quiet(
        self, gateway: GatewayServer, fake_llm: FakeLLM
    ) -> None:
        fake_llm.summary_reply = _slow_summary
        for i in range(50):  # over the background line
            group_message(gateway, i, chatter(i), chat="flood")
        wait_until(lambda: any(is_summary_request(r) for r in fake_llm.chat_requests()), timeout=30)
        for i in range(50, 75):  # the group keeps talking while the summary is written
            group_message(gateway, i, chatter(i), chat="flood")
        (background, idle) = wait_until(
            lambda: compactions(gateway) if len(compactions(gateway)) >= 2 else None,
            timeout=60,
            what="a quiet-time compaction after the background one",
        )
        assert (background.trigger, idle.trigger) == (Trigger.BACKGROUND, Trigger.IDLE)
        with transaction(gateway.runtime.factory) as db:
            late = db.scalars(
                select(Message).where(Message.platform_message_id.in_(["flood-50", "flood-55"]))
            ).all()
            assert [m.archived for m in late] == [True, True]


class TestCompressCommand:
    def test_manual_compress_reports_and_usage_shows_the_gauge(
        self, client: httpx.Client, fake_llm: FakeLLM
    ) -> None:
        for i in range(8):
            post_accepted(client, "manual", chatter(i))
            wait_replies(client, "manual", i + 1)
        post_accepted(client, "manual", "/compress deploys")
        report = wait_replies(client, "manual", 9)[-1]["text"]
        assert report.startswith("Compressed ")
        assert "→" in report
        assert "Summary:" in report
        summary_requests = [r for r in fake_llm.chat_requests() if is_summary_request(r)]
        assert "deploys" in str(summary_requests[-1]["messages"])
        post_accepted(client, "manual", "/usage")
        usage = wait_replies(client, "manual", 10)[-1]["text"]
        assert f"of {WINDOW:,} tokens" in usage
        assert "Compaction starts at" in usage
        assert "Compactions so far: 1." in usage

    def test_compact_alias_with_nothing_to_compress(self, client: httpx.Client) -> None:
        post_accepted(client, "tiny", "hello")
        wait_replies(client, "tiny", 1)
        post_accepted(client, "tiny", "/compact")
        assert "Nothing to compress" in wait_replies(client, "tiny", 2)[-1]["text"]


class TestOverflow:
    def test_provider_overflow_compacts_and_retries(
        self, client: httpx.Client, gateway: GatewayServer, fake_llm: FakeLLM
    ) -> None:
        fake_llm.fail_when = lambda body: (
            Failure.overflow(4000)
            if not is_summary_request(body)
            and fake_llm.counter.count_messages(body["messages"]) > 4000
            else None
        )
        for i in range(10):
            post_accepted(client, "small", chatter(i) * 2)
            wait_replies(client, "small", i + 1)
        texts = [r["text"] for r in replies(client, "small")]
        assert all(t.startswith("echo:") for t in texts), texts
        assert Trigger.OVERFLOW in {c.trigger for c in compactions(gateway)}

    def test_with_compression_disabled_the_user_is_told_and_nothing_is_compacted(
        self,
        db_url: str,
        tmp_path: Path,
        fake_llm: FakeLLM,
        gateway_factory: Callable[..., GatewayServer],
    ) -> None:
        env = hubbub_env(db_url=db_url, home=tmp_path, fake=fake_llm, compression_enabled="false")
        gateway = gateway_factory(settings_from_env(env))
        fake_llm.fail_next(Failure.overflow())
        with httpx.Client(base_url=gateway.base_url, timeout=30) as c:
            post_accepted(c, "off", "hello")
            (notice,) = wait_replies(c, "off", 1)
        assert "automatic compaction is turned off" in notice["text"]
        assert compactions(gateway) == []


class TestSummaryFailures:
    def test_auth_failure_aborts_with_a_warning_and_drops_nothing(
        self, client: httpx.Client, gateway: GatewayServer, fake_llm: FakeLLM
    ) -> None:
        for i in range(8):
            post_accepted(client, "abort", chatter(i))
            wait_replies(client, "abort", i + 1)
        fake_llm.fail_when = lambda body: (
            Failure.unauthorized() if is_summary_request(body) else None
        )
        post_accepted(client, "abort", "/compress")
        text = wait_replies(client, "abort", 9)[-1]["text"]
        assert "nothing was dropped" in text
        assert compactions(gateway) == []
        lines = conversation(client, "abort")
        assert len([m for m in lines if m["role"] == "user"]) == 9

    def test_other_failures_use_the_deterministic_digest(
        self, client: httpx.Client, gateway: GatewayServer, fake_llm: FakeLLM
    ) -> None:
        for i in range(12):
            post_accepted(client, "digest", chatter(i) * 2)
            wait_replies(client, "digest", i + 1)
        fake_llm.fail_when = lambda body: (
            Failure(400, "unsupported parameter") if is_summary_request(body) else None
        )
        post_accepted(client, "digest", "/compress")
        text = wait_replies(client, "digest", 13)[-1]["text"]
        assert "deterministic digest" in text
        (compaction,) = [c for c in compactions(gateway) if c.trigger == Trigger.MANUAL]
        assert compaction.fallback_used
        assert compaction.strategy == "fallback"


class TestRestore:
    def test_a_compaction_can_be_undone(self, client: httpx.Client, gateway: GatewayServer) -> None:
        for i in range(8):
            post_accepted(client, "undo", chatter(i))
            wait_replies(client, "undo", i + 1)
        post_accepted(client, "undo", "/compress")
        wait_replies(client, "undo", 9)
        (compaction,) = compactions(gateway)
        with transaction(gateway.runtime.factory) as db:
            chat_session = db.get(ChatSession, compaction.session_id)
            assert chat_session is not None
            before = chat_session.active_count
            undone = restore_latest(db, chat_session)
            assert undone is not None
            assert undone.id == compaction.id
            assert chat_session.summary is None
            assert chat_session.active_count > before
            assert CompactionRepository.from_session(db).archived(chat_session.id) == []


class TestConcurrentCompaction:
    def test_two_workers_one_compaction_and_new_messages_survive(
        self, gateway: GatewayServer, fake_llm: FakeLLM
    ) -> None:
        fake_llm.summary_reply = _slow_summary
        for i in range(40):
            accepted = group_message(gateway, i, chatter(i), chat="race")
        session_id = accepted.session_id
        compactor = gateway.runtime.compactor
        outcomes: list[str] = []

        def run() -> None:
            outcomes.append(compactor.run(session_id, Trigger.MANUAL).outcome)

        threads = [threading.Thread(target=run) for _ in range(2)]
        for t in threads:
            t.start()
        wait_until(lambda: any(is_summary_request(r) for r in fake_llm.chat_requests()), timeout=30)
        late = [group_message(gateway, 100 + i, f"late message {i}", chat="race") for i in range(3)]
        for t in threads:
            t.join()
        assert sorted(outcomes) == ["busy", "compressed"]
        assert len(compactions(gateway)) == 1
        with transaction(gateway.runtime.factory) as db:
            for item in late:
                message = db.get(Message, item.message_id)
                assert message is not None
                assert not message.archived


def _slow_summary(body: dict[str, Any]) -> str:
    time.sleep(1.0)
    return "## Goal\nKeep going."


class TestSessionsCommand:
    def test_operator_lists_searches_and_undoes(
        self,
        client: httpx.Client,
        gateway: GatewayServer,
        env: dict[str, str],
        monkeypatch: pytest.MonkeyPatch,
    ) -> None:
        from typer.testing import CliRunner

        from gateway.cli import app

        for i in range(8):
            post_accepted(client, "ops", chatter(i))
            wait_replies(client, "ops", i + 1)
        post_accepted(client, "ops", "/compress")
        wait_replies(client, "ops", 9)
        (compaction,) = compactions(gateway)
        for key, value in env.items():
            monkeypatch.setenv(key, value)
        # The CLI sets up logging on a stream CliRunner closes after each call.
        monkeypatch.setattr("gateway.cli.configure_logging", lambda *a, **k: None)
        runner = CliRunner()
        listed = runner.invoke(app, ["sessions", "list"])
        assert compaction.session_id in listed.output
        shown = runner.invoke(app, ["sessions", "compactions", compaction.session_id])
        assert f"#{compaction.id}" in shown.output
        assert "manual/summary" in shown.output
        found = runner.invoke(
            app, ["sessions", "archive", compaction.session_id, "--grep", "app2.log"]
        )
        assert "app2.log" in found.output
        undone = runner.invoke(app, ["sessions", "restore", compaction.session_id])
        assert f"Undid compaction #{compaction.id}" in undone.output
        again = runner.invoke(app, ["sessions", "restore", compaction.session_id])
        assert "Nothing to undo." in again.output
