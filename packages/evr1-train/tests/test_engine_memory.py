"""The memory measurements the benchmarks report (evr1_train.engine.memory), checked on known allocations."""

from __future__ import annotations

import sys

import pytest
import torch

from evr1_train.engine.memory import RssWatch, return_freed_memory, rss_bytes, state_bytes, tensor_peak

MIB = 2**20


def test_tensor_peak_sees_the_live_bytes_of_a_call() -> None:
    def work() -> float:
        a = torch.ones(4 * MIB // 4)  # 4 MiB
        b = torch.ones(8 * MIB // 4)  # 8 MiB alive together with a: 12 MiB
        del a
        c = torch.ones(2 * MIB // 4)  # 10 MiB
        return float(b.sum() + c.sum())

    value, peak = tensor_peak(work)
    assert value == (8 * MIB + 2 * MIB) // 4
    assert 12 * MIB <= peak.peak < 12 * MIB + 64 * 1024  # + the scalars of the sums
    assert abs(peak.net) < 64 * 1024  # everything the call made is freed by its end
    assert peak.events >= 6


def test_state_bytes_counts_weights_grads_and_optimizer_moments() -> None:
    model = torch.nn.Linear(256, 128)  # 32,896 parameters
    model.weight.requires_grad_(False)  # frozen: no gradient, no moments
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad])
    model(torch.ones(2, 256)).sum().backward()
    opt.step()
    got = state_bytes(model, opt)
    assert got == {"weights": 4 * 32_896, "grads": 4 * 128, "optimizer": 2 * 4 * 128}


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="RSS from /proc and glibc's mallopt are Linux's")
def test_rss_watch_sees_a_touched_allocation_and_freed_memory_goes_back() -> None:
    assert return_freed_memory() is True  # glibc here
    watch = RssWatch(0.001).start()
    big = torch.ones(64 * MIB // 4)  # 64 MiB, written, so resident
    during = rss_bytes()
    del big
    watch.stop()
    assert watch.increase >= 48 * MIB
    assert rss_bytes() < during - 48 * MIB  # mmapped: returned to the OS on free, not kept in the heap
