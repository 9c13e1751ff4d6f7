"""Engines behind one protocol: `vllm` (production), `hf` (transformers, CPU/debug), `openai` (remote), `fake` (tests).

Importing this package is light: each backend imports its engine inside `start()`.
"""

from evr1_eval.backends import fake, hf, openai, vllm  # noqa: F401  (register the built-in backends)
from evr1_eval.backends.base import (
    Backend,
    BackendConfig,
    BackendError,
    EngineDead,
    GenerationParams,
    ImageInput,
    Request,
    VideoInput,
)
from evr1_eval.backends.registry import backend_names, check_backend, create_backend, register

__all__ = [
    "Backend",
    "BackendConfig",
    "BackendError",
    "EngineDead",
    "GenerationParams",
    "ImageInput",
    "Request",
    "VideoInput",
    "backend_names",
    "check_backend",
    "create_backend",
    "register",
]
