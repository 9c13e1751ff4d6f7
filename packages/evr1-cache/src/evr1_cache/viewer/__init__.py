"""The evr1 viewer: one static HTML site for evaluation runs and training rollouts (`pip install 'evr1-cache[viewer]'`).

evr1-eval (`evr1-eval report --html`) and evr1-train (`evr1-train view`) convert their own run folders into the
records below and call `write_site`; the frames come from this package's cache, so the page shows the exact frames
and timestamps the model saw. Importing this package loads the stdlib records only; Jinja2 and Pillow load when a
site is written.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from evr1_cache.lazy import lazy_exports
from evr1_cache.viewer.records import Curve, MediaRef, ResponseRecord, RunRecord, SampleRecord, shown_prompt

if TYPE_CHECKING:
    from evr1_cache.viewer.site import SiteResult, write_site
    from evr1_cache.viewer.thumbs import entry_frames

__all__ = (
    "Curve", "MediaRef", "ResponseRecord", "RunRecord", "SampleRecord", "SiteResult", "entry_frames", "shown_prompt",
    "write_site",
)  # fmt: skip
_LAZY = {
    "write_site": "evr1_cache.viewer.site",
    "SiteResult": "evr1_cache.viewer.site",
    "entry_frames": "evr1_cache.viewer.thumbs",
}
__getattr__, __dir__ = lazy_exports(__name__, _LAZY)
