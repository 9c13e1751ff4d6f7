"""Errors that mean "the configuration or the command line is wrong", with a message that names the key and the fix.

`evr1-train` prints such an error as one short message and exits with status 2 (no traceback); anything else is a
bug or an environment problem and keeps its traceback.

Names (stable): ConfigError (a model path that is not a model is `evr1_cache.ModelPathError`, shared with evr1-eval)
"""

from __future__ import annotations


class ConfigError(ValueError):
    """A setting (or combination) that cannot work; the message names the key."""
