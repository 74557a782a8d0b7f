"""Stream a reply into its platform messages while the model writes it, never posting twice.

The agent hands the reply's text so far to a :class:`DraftStreamer` (the turn's
``on_text``); the streamer asks a :class:`~workers.drafts.DraftCoalescer` which call to
make and makes it through the bot's deliverer (:class:`adapters.base.DraftEditor`: the
same object, and so the same rate limits, as every other platform call of the bot; a
draft waits at most ``DRAFT_MAX_WAIT_SECONDS`` for its slot, else it is held back as by a
429 and its text goes out with a later call).

Exactly once: before a new draft message is posted, the outbox's ``reply_streams`` row
says a post is under way (durable); its id is recorded right after, before any edit of it.
A turn that runs again (a worker killed mid-stream) starts from the recorded messages and
edits them; a post whose outcome is unknown stops streaming for the turn, and the final
delivery marks the reply unknown where the platform cannot settle it. A draft someone
deleted stops streaming too: the final delivery posts the rest of the reply anew and
records the new message in the deleted one's place. Nothing here ever
fails the turn: a streaming problem stops streaming, and the reply is delivered as usual.

Web chat has no platform messages to edit: a :class:`FeedStreamer` publishes the reply so
far to the page's live feed (:mod:`adapters.webchat.feed`), and the delivered reply
replaces it on the page. Nothing is recorded: a draft is never stored, so a turn that runs
again simply publishes its own.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from sqlalchemy.orm import Session, sessionmaker

from adapters.base import DeliveryError, DraftEditor, MessageGone
from adapters.messages import ChatTarget
from adapters.pacing import waiting_at_most
from adapters.webchat.feed import STREAM_META_KEY
from agent_core.config import DRAFT_MAX_WAIT_SECONDS, DRAFT_SHARE_OF_LIMITS, Settings
from agent_core.db.engine import transaction
from agent_core.db.models import ChatSession, Message
from agent_core.outbox.repository import OutboxRepository
from workers.aio import BackgroundLoop
from workers.drafts import DraftAction, DraftCall, DraftCoalescer, whole_words

log = logging.getLogger(__name__)

DRAFT_CALL_TIMEOUT_SECONDS = 30.0
"""Longest one draft call may take; a post that outlives it may have arrived."""
EDITED_PLATFORMS = frozenset({"telegram", "discord", "slack"})
"""Where a streamed reply grows in platform messages, recorded in ``reply_streams``."""
STREAMED_PLATFORMS = EDITED_PLATFORMS | {"webchat"}
"""Web chat streams to its page's live feed (Server-Sent Events), not by message edits."""
_OFF = frozenset({"off", "false", "0", "no"})


def streaming_enabled(settings: Settings, platform: str, extra: dict[str, Any]) -> bool:
    """Whether replies of a bot are streamed: its ``streaming`` setting, else the global."""
    if platform not in STREAMED_PLATFORMS:
        return False
    value = extra.get("streaming")
    if value is None:
        return settings.streaming
    if isinstance(value, bool):
        return value
    return str(value).strip().lower() not in _OFF


def edit_interval(settings: Settings, platform: str) -> float:
    """Seconds between draft calls of one reply on ``platform``."""
    if platform == "discord":
        return settings.stream_edit_interval_discord
    if platform == "slack":
        return settings.stream_edit_interval_slack
    if platform == "webchat":
        return settings.stream_edit_interval_webchat
    return settings.stream_edit_interval


@dataclass(frozen=True, slots=True)
class StreamTarget:
    """The reply being streamed: its turn's message, its bot and its chat."""

    trigger_message_id: int
    bot_id: int
    chat: ChatTarget


class DraftStreamer:
    """The ``on_text`` of one turn: turns the growing text into draft posts and edits.

    Called on the agent's thread; each call makes at most one platform call, inline.
    """

    def __init__(
        self,
        factory: sessionmaker[Session],
        editor: DraftEditor,
        loop: BackgroundLoop,
        target: StreamTarget,
        *,
        interval: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._factory = factory
        self._editor = editor
        self._loop = loop
        self._target = target
        self._interval = interval
        self._clock = clock
        self._coalescer: DraftCoalescer | None = None
        self._ids: list[str] = []
        self.stopped = False
        """Set once streaming gave up for this turn (the reply is still delivered)."""

    def __call__(self, text: str) -> None:
        """Show ``text`` (the reply so far) as far as the interval allows; never raises."""
        if self.stopped:
            return
        try:
            self._advance(text)
        except Exception:
            log.exception(
                "streaming stopped", extra={"trigger_message_id": self._target.trigger_message_id}
            )
            self.stopped = True

    def before_final(self, sleep: Callable[[float], None] = time.sleep) -> None:
        """Wait out the interval since the last draft call: the final edit counts too."""
        if self._coalescer is not None and self._ids:
            wait = self._coalescer.wait_seconds(self._clock())
            if wait:
                sleep(wait)

    def _advance(self, text: str) -> None:
        coalescer = self._coalescer or self._resume()
        if coalescer is None:
            return
        call = coalescer.next_call(text, self._clock())
        if call is None:
            return
        if call.action is DraftAction.POST:
            self._post(coalescer, call)
        else:
            self._edit(coalescer, call)

    def _resume(self) -> DraftCoalescer | None:
        """The coalescer, starting from what an earlier run of this turn posted."""
        with transaction(self._factory, durable=False) as db:
            found = OutboxRepository.from_session(db).streamed(self._target.trigger_message_id)
        if found is not None and found.unsettled:
            log.warning(
                "an earlier run of this turn may have posted a draft it did not record; "
                "not streaming, so nothing is posted twice",
                extra={"trigger_message_id": self._target.trigger_message_id},
            )
            self.stopped = True
            return None
        self._ids = list(found.message_ids) if found is not None else []
        self._coalescer = DraftCoalescer(
            interval=self._interval,
            limit=self._editor.draft_limit,
            measure=self._editor.draft_length,
            posted=len(self._ids),
        )
        return self._coalescer

    def _post(self, coalescer: DraftCoalescer, call: DraftCall) -> None:
        target = self._target
        # Durable before the post leaves: a crash after it must not lead to a second one.
        with transaction(self._factory) as db:
            before = OutboxRepository.from_session(db).stream_posting(
                target.trigger_message_id, target.bot_id
            )
        if before.unsettled or len(before.message_ids) != len(self._ids):
            self.stopped = True  # another run of this turn is streaming it
            return
        try:
            message_id = self._loop.run(
                waiting_at_most(
                    DRAFT_MAX_WAIT_SECONDS,
                    self._editor.post_draft(target.chat, call.text),
                    share=DRAFT_SHARE_OF_LIMITS,
                ),
                timeout=DRAFT_CALL_TIMEOUT_SECONDS,
            )
        except DeliveryError as exc:
            if exc.maybe_sent:
                self._stop_unsettled(exc)
                return
            self._record_post(None)
            if exc.retry_after is None:
                self.stopped = True
                log.warning("a draft was refused; not streaming", extra={"error": str(exc)})
                return
            coalescer.hold(exc.retry_after, self._clock())
            return
        except TimeoutError as exc:
            self._stop_unsettled(exc)
            return
        self._record_post(message_id)
        self._ids.append(message_id)
        coalescer.done(call, self._clock())

    def _edit(self, coalescer: DraftCoalescer, call: DraftCall) -> None:
        try:
            self._loop.run(
                waiting_at_most(
                    DRAFT_MAX_WAIT_SECONDS,
                    self._editor.edit_draft(self._target.chat, self._ids[call.part], call.text),
                    share=DRAFT_SHARE_OF_LIMITS,
                ),
                timeout=DRAFT_CALL_TIMEOUT_SECONDS,
            )
        except MessageGone:
            # Someone deleted the draft: the final delivery posts the reply anew.
            self.stopped = True
            log.info(
                "a draft was deleted while the reply streamed; not streaming it further",
                extra={"trigger_message_id": self._target.trigger_message_id},
            )
            return
        except DeliveryError as exc:
            if not exc.retryable:
                self.stopped = True
                log.warning("a draft edit was refused; not streaming", extra={"error": str(exc)})
                return
            coalescer.hold(exc.retry_after or self._interval, self._clock())
            return
        except TimeoutError:
            # An edit may be made again: it is simply tried at the next interval.
            coalescer.hold(self._interval, self._clock())
            return
        coalescer.done(call, self._clock())

    def _record_post(self, message_id: str | None) -> None:
        with transaction(self._factory) as db:
            OutboxRepository.from_session(db).stream_posted(
                self._target.trigger_message_id, message_id
            )

    def _stop_unsettled(self, exc: Exception) -> None:
        """A post may have arrived without its id: the row stays unsettled, streaming stops."""
        self.stopped = True
        log.warning(
            "a draft post may or may not have arrived; not streaming this reply further",
            extra={"trigger_message_id": self._target.trigger_message_id, "error": str(exc)},
        )


DraftPublisher = Callable[[str, int | str, str], None]
"""Shows a web chat page the reply so far: ``(chat_id, reply_to line id, text)``; it never
raises (:meth:`adapters.webchat.deliverer.WebchatDeliverer.publish_draft`)."""


class DraftFeed(Protocol):
    """Where a web chat bot's pages hear drafts: its deliverer (``WebchatDeliverer``)."""

    def publish_draft(self, chat_id: str, reply_to_message_id: int | str, text: str) -> None:
        """Show the reply so far; never raises."""

    def watched(self, chat_id: str) -> bool:
        """Whether a page listens to ``chat_id`` now; never raises."""


class FeedStreamer:
    """The ``on_text`` of a web chat turn: the page's feed gets the reply so far.

    Whole words only, at most one draft per ``interval``, never the same text twice.
    """

    def __init__(
        self,
        publish: DraftPublisher,
        chat_id: str,
        reply_to: int,
        *,
        interval: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._publish = publish
        self._chat_id = chat_id
        self._reply_to = reply_to
        self._interval = interval
        self._clock = clock
        self._shown = ""
        self._next_at = float("-inf")

    def __call__(self, text: str) -> None:
        """Publish ``text`` (the reply so far) when the interval allows; never raises."""
        now = self._clock()
        if now < self._next_at:
            return
        shown = whole_words(text)
        if not shown or shown == self._shown:
            return
        self._publish(self._chat_id, self._reply_to, shown)
        self._shown = shown
        self._next_at = now + self._interval


class StreamService:
    """Opens a :class:`DraftStreamer` for the turns whose replies are streamed.

    Args:
        settings: the global switch and the per-platform intervals.
        factory: the database.
        editors: the bot's draft editor and the loop it runs on, or ``None`` when the
            bot's deliverer streams nothing (the delivery service provides them).
        publishers: for a web chat bot, how its pages are shown drafts (and its options);
            a reply is streamed only to a conversation a page watches.
    """

    def __init__(
        self,
        settings: Settings,
        factory: sessionmaker[Session],
        editors: Callable[[int], tuple[DraftEditor, dict[str, Any], BackgroundLoop] | None],
        publishers: Callable[[int], tuple[DraftFeed, dict[str, Any]] | None],
    ) -> None:
        self._settings = settings
        self._factory = factory
        self._editors = editors
        self._publishers = publishers

    def open(
        self, chat_session: ChatSession, trigger: Message
    ) -> DraftStreamer | FeedStreamer | None:
        """The streamer for the reply to ``trigger``, or ``None`` when it is not streamed."""
        if chat_session.platform not in STREAMED_PLATFORMS:
            return None
        if chat_session.platform == "webchat":
            return self._open_feed(chat_session, trigger)
        found = self._editors(chat_session.bot_id)
        if found is None:
            return None
        editor, extra, loop = found
        if not streaming_enabled(self._settings, chat_session.platform, extra):
            return None
        chat = ChatTarget(
            platform=chat_session.platform,
            chat_id=chat_session.chat_id,
            thread_id=chat_session.thread_id,
            chat_type="group" if chat_session.chat_type == "group" else "private",
            reply_to_message_id=trigger.platform_message_id,
        )
        return DraftStreamer(
            self._factory,
            editor,
            loop,
            StreamTarget(trigger.id, chat_session.bot_id, chat),
            interval=edit_interval(self._settings, chat_session.platform),
        )

    def _open_feed(self, chat_session: ChatSession, trigger: Message) -> FeedStreamer | None:
        found = self._publishers(chat_session.bot_id)
        if found is None:
            return None
        feed, extra = found
        if not streaming_enabled(self._settings, chat_session.platform, extra):
            return None
        asked = bool((trigger.meta or {}).get(STREAM_META_KEY))
        if not asked and not feed.watched(chat_session.chat_id):
            return None
        return FeedStreamer(
            feed.publish_draft,
            chat_session.chat_id,
            trigger.id,
            interval=edit_interval(self._settings, chat_session.platform),
        )
