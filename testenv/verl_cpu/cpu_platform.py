"""Test env only: a `cpu` platform for verl 0.9.1 (which ships cuda/npu/rocm only), so its trainer runs on a CPU.

Loaded in every verl process with `VERL_USE_EXTERNAL_MODULES=cpu_platform VERL_PLATFORM=cpu` (this folder on
PYTHONPATH). The Ray resource stays "GPU" because verl's resource pools hard-code `use_gpu=True`: Ray is started with
a fake GPU count. verl builds the process-group backend as "cpu:gloo,<device>:<backend>", which is invalid when the
device is cpu, so its initialiser is wrapped to ask for plain gloo.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch
from verl.plugin.platform.platform_base import PlatformBase
from verl.plugin.platform.platform_manager import PlatformRegistry


class _CpuDevice:
    """`torch.cpu` plus inert stand-ins for the torch.cuda memory/stream calls verl makes on its device module."""

    def __getattr__(self, name: str) -> Any:
        if hasattr(torch.cpu, name):
            return getattr(torch.cpu, name)
        if name == "mem_get_info":
            import psutil

            return lambda *a, **k: (psutil.virtual_memory().available, psutil.virtual_memory().total)
        if name == "get_device_name":
            return lambda *a, **k: "CPU"
        if name == "is_available":
            return lambda: True
        if name.startswith(("memory_", "max_memory", "reset_", "empty_cache", "ipc_collect")):
            return lambda *a, **k: 0
        raise AttributeError(name)


_DEVICE = _CpuDevice()


@PlatformRegistry.register("cpu")
class CpuPlatform(PlatformBase):
    device_name = property(lambda self: "cpu")
    vendor_name = property(lambda self: "cpu")
    device_module = property(lambda self: _DEVICE)

    def is_available(self) -> bool:
        return True

    def current_device(self) -> str:
        return "cpu"

    def device_count(self) -> int:
        return 1

    def set_device(self, device_index: int) -> None:
        return None

    def synchronize(self, device_index: int | None = None) -> None:
        return None

    def manual_seed(self, seed: int) -> None:
        torch.manual_seed(seed)

    def manual_seed_all(self, seed: int) -> None:
        torch.manual_seed(seed)

    def set_allocator_settings(self, settings: Any) -> None:
        return None

    def empty_cache(self) -> None:
        return None

    def get_device_capability(self, device_index: int = 0) -> tuple[None, None]:
        return (None, None)

    def communication_backend_name(self) -> str:
        return "gloo"

    def visible_devices_envvar(self) -> str:
        return "CUDA_VISIBLE_DEVICES"

    @contextlib.contextmanager
    def nvtx_range(self, msg: str) -> Iterator[None]:
        yield

    def profiler_start(self) -> None:
        return None

    def profiler_stop(self) -> None:
        return None

    def ray_resource_name(self) -> str:
        return "GPU"

    def ray_noset_envvars(self) -> list[str]:
        return ["RAY_EXPERIMENTAL_NOSET_CUDA_VISIBLE_DEVICES"]

    def is_ipc_supported(self) -> bool:
        return False

    def cudart(self) -> None:
        return None


def _gloo_only() -> None:
    import verl.utils.distributed as dist

    original = dist.initialize_global_process_group_ray
    if getattr(original, "__evr1_cpu__", False):
        return

    def init(timeout_second: Any = None, backend: Any = None) -> Any:
        return original(timeout_second=timeout_second, backend=backend or "gloo")

    init.__evr1_cpu__ = True  # type: ignore[attr-defined]
    dist.initialize_global_process_group_ray = init


_gloo_only()
