"""Per-process coordination of the n sessions of one prompt group (slot numbers, online accuracies).

Why: verl's legacy trainer does not tell an agent loop which of the n rollouts it is, and the "below_accuracy" gate
must wait for the online rollouts of the same group. All sessions of a group run as asyncio tasks in one agent-loop
worker, created in slot order, so a per-uid counter claimed before the first `await` reproduces the slot index and
an asyncio condition lets offline slots wait for their siblings' accuracies.

Names (stable): GroupBoard, BOARD (process-wide instance)
"""

from __future__ import annotations

import asyncio
import math
import weakref
from collections import defaultdict


class GroupBoard:
    """Slot counters and posted online accuracies, keyed by the group's uid."""

    def __init__(self) -> None:
        self._next: dict[str, int] = defaultdict(int)
        self._acc: dict[str, list[float]] = defaultdict(list)
        self._conds: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Condition] = (
            weakref.WeakKeyDictionary()
        )

    def claim_slot(self, uid: str, n: int) -> int:
        """The next slot index of group `uid` (0..n-1); call before any await in the agent loop."""
        slot = self._next[uid]
        self._next[uid] = slot + 1
        if slot + 1 >= n:
            self._next.pop(uid, None)
        return slot % n

    def _condition(self) -> asyncio.Condition:
        """One condition per event loop (a worker runs one loop; tests and restarts may run several)."""
        return self._conds.setdefault(asyncio.get_running_loop(), asyncio.Condition())

    async def post_accuracy(self, uid: str, accuracy: float) -> None:
        cond = self._condition()
        async with cond:
            self._acc[uid].append(float(accuracy) if math.isfinite(float(accuracy)) else float("nan"))
            cond.notify_all()

    async def wait_accuracies(self, uid: str, expected: int, timeout_s: float) -> list[float]:
        """Accuracies of the group's online rollouts: all `expected` of them, or what arrived before the timeout."""
        cond = self._condition()
        async with cond:
            try:
                await asyncio.wait_for(cond.wait_for(lambda: len(self._acc[uid]) >= expected), timeout_s)
            except TimeoutError:
                pass
            return list(self._acc[uid])

    def release(self, uid: str) -> None:
        self._acc.pop(uid, None)


BOARD = GroupBoard()
