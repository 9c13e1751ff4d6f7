"""The run's progress bar: samples/s and ETA (tqdm), plus tokens/s, in-flight requests, cache hits and errors."""

from __future__ import annotations

import time
from typing import Any


class Progress:
    """A thin tqdm wrapper; `enabled=False` keeps the counters (for the final log line) without drawing."""

    def __init__(self, total: int, *, enabled: bool = True, desc: str = "eval") -> None:
        self.total = total
        self.done = 0
        self.errors = 0
        self.tokens = 0
        self.cache_hits = 0
        self.in_flight = 0
        self.started = time.perf_counter()
        self._bar: Any = None
        if enabled:
            from tqdm.auto import tqdm

            self._bar = tqdm(total=total, desc=desc, unit="sample", dynamic_ncols=True, smoothing=0.1)

    @property
    def elapsed(self) -> float:
        return time.perf_counter() - self.started

    def stats(self) -> dict[str, float]:
        dt = max(self.elapsed, 1e-9)
        return {
            "samples_per_s": self.done / dt,
            "tokens_per_s": self.tokens / dt,
            "in_flight": self.in_flight,
            "errors": self.errors,
            "cache_hits": self.cache_hits,
        }

    def _refresh(self) -> None:
        if self._bar is not None:
            s = self.stats()
            self._bar.set_postfix(
                tok_s=f"{s['tokens_per_s']:.0f}", in_flight=self.in_flight, err=self.errors, refresh=False
            )

    def started_one(self) -> None:
        self.in_flight += 1
        self._refresh()

    def finished_one(self, *, tokens: int, error: bool) -> None:
        self.in_flight -= 1
        self.done += 1
        self.tokens += tokens
        self.errors += int(error)
        self._refresh()
        if self._bar is not None:
            self._bar.update(1)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
