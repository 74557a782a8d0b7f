"""Remember recently handled ``update_id`` values so platform retries are dropped early.

Telegram re-sends a webhook update it did not see acknowledged, and polling re-serves
updates after a restart. The durable guard is downstream (messages are stored once per
platform message id, and re-applying an edit changes nothing); this in-memory window
saves that work and keeps a retried edit from being applied again.
"""

from __future__ import annotations

from collections import OrderedDict

DEFAULT_CAPACITY = 10_000


class RecentUpdates:
    """A bounded, insertion-ordered set of update ids, with an in-flight mark.

    ``begin`` claims an id (``False`` if it is done or being handled), then ``finish`` marks
    it done or ``abandon`` releases it so a retry can handle it.
    """

    def __init__(self, capacity: int = DEFAULT_CAPACITY) -> None:
        if capacity < 1:
            raise ValueError("`capacity` must be a positive integer")
        self._capacity = capacity
        self._done: OrderedDict[int, None] = OrderedDict()
        self._in_flight: set[int] = set()

    def begin(self, update_id: int) -> bool:
        """Claim ``update_id``; ``False`` when it was handled or is being handled now."""
        if update_id in self._done or update_id in self._in_flight:
            return False
        self._in_flight.add(update_id)
        return True

    def finish(self, update_id: int) -> None:
        """Mark a claimed update handled, forgetting the oldest beyond capacity."""
        self._in_flight.discard(update_id)
        self._done[update_id] = None
        while len(self._done) > self._capacity:
            self._done.popitem(last=False)

    def abandon(self, update_id: int) -> None:
        """Release a claimed update that failed, so its retry is handled."""
        self._in_flight.discard(update_id)

    def __contains__(self, update_id: object) -> bool:
        return update_id in self._done
