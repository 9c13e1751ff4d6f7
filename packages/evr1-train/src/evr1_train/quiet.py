"""Silence third-party start-up messages that tell an evr1 user nothing they can act on.

verl 0.9.1 prints, on every import on a machine without its optional engines or a GPU, five `UserWarning`s ("torchtitan
/ veomni / automodel / mindspeed / megatron engine is not available") and two platform warnings ("No supported
accelerator detected ... Falling back to 'nvidia'", "Platform 'nvidia' ... is registered but not available"); the
local engine on a CPU needs none of those engines or platforms. Only these exact messages are filtered: every other
warning still shows, and `EVR1_SHOW_ALL_WARNINGS=1` shows these too.

Names (stable): quiet_third_party() (idempotent), filter_engine_warnings(), NoAcceleratorNotes
"""

from __future__ import annotations

import logging
import os
import re
import warnings

#: verl/workers/engine/__init__.py: one `warnings.warn(f"{name} engine is not available: {e!r}")` per optional engine.
_ENGINE_WARNING = r"\w+ engine is not available: ModuleNotFoundError"
#: verl/plugin/platform/platform_manager.py: logged when torch sees no accelerator.
_PLATFORM_MESSAGES = re.compile(
    r"^(No supported accelerator detected\. .*Falling back to|Platform '.*' \(.*\) is registered but not available)"
)
_PLATFORM_LOGGER = "verl.plugin.platform.platform_manager"


class NoAcceleratorNotes(logging.Filter):
    """Drops verl's "no accelerator" notes (they only say that this machine has no GPU)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not _PLATFORM_MESSAGES.match(str(record.msg))


_INSTALLED: list[bool] = []


def filter_engine_warnings() -> None:
    """Ignore verl's "<name> engine is not available" warnings (in the current `warnings` filter list)."""
    warnings.filterwarnings("ignore", message=_ENGINE_WARNING, category=UserWarning, module=r"verl\.workers\.engine")


def quiet_third_party() -> None:
    """Install both filters once per process (no-op with EVR1_SHOW_ALL_WARNINGS=1)."""
    if _INSTALLED or os.environ.get("EVR1_SHOW_ALL_WARNINGS", "0") == "1":
        return
    filter_engine_warnings()
    logging.getLogger(_PLATFORM_LOGGER).addFilter(NoAcceleratorNotes())
    _INSTALLED.append(True)
