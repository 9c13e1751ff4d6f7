"""Test-environment only (never shipped): let PyPI's CUDA-linked torchvision import beside a CPU-only torch.

The only torchvision release that matches the CPU torch available here is a CUDA-linked wheel whose `_C` extension
cannot load; its meta registrations then fail with "operator torchvision::nms does not exist". Declaring the two
operator schemas (without kernels) right before torchvision is first imported lets the pure-torch parts load, which is
all the Qwen-VL image/video processors use. Loaded from a `.pth` file so vLLM's spawned workers get it too.
"""

from __future__ import annotations

import importlib.abc
import sys

_keepalive: list[object] = []


def _declare_ops() -> None:
    import torch

    try:
        torch.ops.torchvision.nms  # noqa: B018 - a working torchvision build already declared it
        return
    except (AttributeError, RuntimeError):
        pass
    lib = torch.library.Library("torchvision", "DEF")
    lib.define("nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
    lib.define("qnms(Tensor qdets, Tensor scores, float iou_threshold) -> Tensor")
    _keepalive.append(lib)


class _BeforeTorchvision(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path, target=None):  # type: ignore[no-untyped-def]
        if fullname == "torchvision":
            sys.meta_path.remove(self)
            _declare_ops()
        return None


sys.meta_path.insert(0, _BeforeTorchvision())
