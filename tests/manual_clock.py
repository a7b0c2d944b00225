"""A clock for lease tests: time moves only when the test says so (the lease's ``Clock`` protocol)."""

from __future__ import annotations

import threading


class ManualClock:
    """A clock that moves only when :meth:`advance` is called: lease timing without sleeping.

    Both ``time()`` and ``monotonic()`` follow it. Heartbeat threads wait on it; ``advance``
    moves time forward deadline by deadline and, at each, lets every heartbeat that fell due run
    its renewal to completion before moving on -- so after ``advance(1.5)`` with a 0.2 s heartbeat,
    the seven renewals have happened, in order, exactly as they would have in 1.5 s of real time.
    """

    def __init__(self, start: float = 1_700_000_000.0) -> None:
        self._now = start
        self._cond = threading.Condition()
        self._waiting: dict[threading.Thread, float] = {}  # heartbeat thread -> its deadline
        self._due: set[threading.Thread] = set()  # started or woken, not waiting (yet / again)

    def time(self) -> float:
        with self._cond:
            return self._now

    def monotonic(self) -> float:
        return self.time()

    def starting(self, thread: threading.Thread) -> None:
        # Counted as running until its first wait: advance() never moves past a heartbeat that
        # has been started but has not begun waiting yet.
        with self._cond:
            self._due.add(thread)

    def wait(self, event: threading.Event, seconds: float) -> bool:
        me = threading.current_thread()
        with self._cond:
            self._due.discard(me)
            self._waiting[me] = self._now + seconds
            self._cond.notify_all()
            try:
                while not event.is_set() and self._now < self._waiting[me]:
                    # Polled because an Event cannot notify a Condition; only to notice release().
                    self._cond.wait(0.005)
                if not event.is_set():
                    self._due.add(me)
                return event.is_set()
            finally:
                del self._waiting[me]
                self._cond.notify_all()

    def advance(self, seconds: float) -> None:
        """Move time forward by ``seconds``, running every heartbeat that falls due on the way."""
        with self._cond:
            target = self._now + seconds
            while True:
                due = [d for d in self._waiting.values() if d <= target]
                self._now = min([target, *due])
                self._cond.notify_all()
                # Let each woken heartbeat finish its renewal (it waits again, or its thread ends).
                while any(t.is_alive() and t not in self._waiting for t in self._due) or any(
                    d <= self._now for d in self._waiting.values()
                ):
                    self._cond.wait(0.005)
                self._due = {t for t in self._due if t.is_alive() and t not in self._waiting}
                if self._now >= target:
                    return
