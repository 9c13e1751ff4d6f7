"""Memory of a training run, measured so that what training costs is not drowned by what the process already holds.

Why: a process's peak RSS (`ru_maxrss`) on a small model is mostly the PyTorch runtime, the tokenizer and the
datasets, and it only grows, so two runs that differ only in training state (full fine-tuning vs LoRA) look alike.
Three views separate the parts:
- `RssWatch`: RSS sampled every few milliseconds in a background thread from a baseline taken after set-up (model,
  data, optimiser built), so its peak minus the baseline is what training itself added, in the same process;
- `state_bytes`: the bytes of the tensors training keeps between steps -- weights, gradients, optimiser moments --
  counted from the live tensors (not a formula);
- `tensor_peak`: the peak of live CPU tensor bytes over one call (one training step), from the allocation and free
  events of torch's profiler (`profile_memory=True`): activations, KV caches and temporaries, free of allocator
  caching and fragmentation.

And one fix: `return_freed_memory()`. glibc serves a large allocation from mmap (returned to the OS on free) only
above a threshold that it raises to the size of each mmapped block freed, up to 32 MiB; after the first training step
the activations of every later step come from the heap, and a freed heap keeps its pages. On the quickstart that
retained heap, not tensors, made LoRA's peak RSS look higher than full fine-tuning's (benchmarks/lora_vs_full.py).
A fixed threshold (mallopt M_MMAP_THRESHOLD, which also switches the dynamic raise off) keeps RSS close to the live
tensors.

Names (stable): rss_bytes(), RssWatch, state_bytes(model, optimizer), tensor_peak(fn) -> (result, TensorPeak),
return_freed_memory(threshold).
"""

from __future__ import annotations

import os
import resource
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

T = TypeVar("T")
GIB = 2**30


def rss_bytes() -> int:
    """The current resident set size of this process (Linux `/proc/self/statm`; elsewhere the peak so far)."""
    try:
        with open("/proc/self/statm", encoding="ascii") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return int(peak if sys.platform == "darwin" else peak * 1024)


class RssWatch:
    """Samples RSS every `interval` seconds in a daemon thread between `start()` and `stop()`.

    `baseline` is the RSS at `start()`; `peak` the largest sample (the start and stop values included), so
    `peak - baseline` is what the watched code added at its highest point."""

    def __init__(self, interval: float = 0.005) -> None:
        self.interval = interval
        self.baseline = 0
        self.peak = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> RssWatch:
        self.baseline = self.peak = rss_bytes()
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="evr1-rss-watch", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.peak = max(self.peak, rss_bytes())

    def stop(self) -> RssWatch:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self.peak = max(self.peak, rss_bytes())
        return self

    @property
    def increase(self) -> int:
        return max(0, self.peak - self.baseline)


M_MMAP_THRESHOLD = -3  # glibc's mallopt parameter number (malloc.h)
_MMAP_THRESHOLD_BYTES = 128 * 1024  # glibc's own initial value


def return_freed_memory(threshold: int = _MMAP_THRESHOLD_BYTES) -> bool:
    """Fix glibc's mmap threshold at `threshold` bytes for this process: allocations above it are mmapped and go
    back to the OS when freed. True when set; False where the C library is not glibc (nothing changes)."""
    if not sys.platform.startswith("linux"):
        return False
    import ctypes

    try:
        libc = ctypes.CDLL(None)
        if not hasattr(libc, "gnu_get_libc_version"):  # musl and others: no mallopt semantics to rely on
            return False
        return bool(libc.mallopt(M_MMAP_THRESHOLD, int(threshold)))
    except (OSError, AttributeError):
        return False


def state_bytes(model: Any, optimizer: Any = None) -> dict[str, int]:
    """Bytes of the tensors training keeps between steps: `weights` (every parameter and buffer), `grads` (the
    gradients that exist now) and `optimizer` (the optimiser's state tensors, e.g. AdamW's two moments)."""
    import torch

    seen: set[int] = set()

    def size(t: Any) -> int:
        if not isinstance(t, torch.Tensor):
            return 0
        key = t.untyped_storage().data_ptr()
        if key in seen:  # tied weights, views
            return 0
        seen.add(key)
        return int(t.untyped_storage().nbytes())

    weights = sum(size(p) for p in model.parameters()) + sum(size(b) for b in model.buffers())
    grads = sum(size(p.grad) for p in model.parameters() if p.grad is not None)
    states = optimizer.state.values() if optimizer is not None else ()
    moments = sum(size(v) for s in states for v in s.values() if isinstance(v, torch.Tensor) and v.dim() > 0)
    return {"weights": weights, "grads": grads, "optimizer": moments}


@dataclass(frozen=True)
class TensorPeak:
    """Live CPU tensor bytes over one profiled call: `peak` above the bytes alive at its start, `net` at its end."""

    peak: int
    net: int
    events: int


def tensor_peak(fn: Callable[[], T]) -> tuple[T, TensorPeak]:
    """Run `fn` under torch's profiler with memory tracking; the running sum of its CPU allocation/free events gives
    the peak of tensor bytes allocated during the call (allocator caching and fragmentation excluded). Slow: profile
    one step, not a run."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True, record_shapes=False) as prof:
        result = fn()
    kineto = prof.profiler.kineto_results.events()
    memory = [ev for ev in kineto if ev.name() == "[memory]" and str(ev.device_type()).endswith("CPU")]
    events = sorted(((ev.start_ns(), int(ev.nbytes())) for ev in memory), key=lambda e: e[0])
    live = peak = 0
    for _, nbytes in events:
        live += nbytes
        peak = max(peak, live)
    return result, TensorPeak(peak, live, len(events))
