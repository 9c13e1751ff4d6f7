"""The package surface: light import, lazy heavy names, everything public reachable from `evr1_cache`."""

from __future__ import annotations

import importlib.metadata
import json
import subprocess
import sys
import types

import pytest

import evr1_cache


def test_import_is_light_and_names_resolve_lazily() -> None:
    code = (
        "import sys, evr1_cache\n"
        "heavy = {'numpy', 'av', 'safetensors', 'PIL', 'datasets', 'torch', 'ffmpeg', 'tqdm'}\n"
        "assert not heavy & {m.split('.')[0] for m in sys.modules}, sorted(heavy & set(sys.modules))\n"
        "from evr1_cache import CacheReader, build_cache, decode_video, load_image, probe\n"
        "assert callable(probe) and callable(decode_video) and CacheReader.__name__ == 'CacheReader'\n"
        "assert 'evr1_cache.reader' in sys.modules and 'evr1_cache.build' in sys.modules\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr


def test_public_names() -> None:
    for name in evr1_cache.__all__:
        assert getattr(evr1_cache, name) is not None, name
    assert evr1_cache.__version__ == importlib.metadata.version("evr1-cache")
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        _ = evr1_cache.nope


def test_lazy_exports_load_on_first_read_and_keep_the_value(monkeypatch: pytest.MonkeyPatch) -> None:
    from evr1_cache.lazy import lazy_exports

    package = types.ModuleType("lazy_demo")
    package.__all__ = ["dumps", "__version__"]  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "lazy_demo", package)
    getattr_, dir_ = lazy_exports("lazy_demo", {"dumps": "json", "JSONDecoder": "json.decoder"}, dist="no-such-dist")
    assert "dumps" not in vars(package)
    assert getattr_("dumps") is json.dumps
    assert vars(package)["dumps"] is json.dumps  # read once, then an ordinary attribute
    assert getattr_("JSONDecoder") is json.JSONDecoder  # from a submodule
    assert getattr_("__version__") == "0+unknown"  # a source tree that was never installed
    assert dir_() == ["__version__", "dumps"]
    with pytest.raises(AttributeError, match="module 'lazy_demo' has no attribute 'nope'"):
        getattr_("nope")
    getattr_, _ = lazy_exports("lazy_demo", {})
    with pytest.raises(AttributeError, match="__version__"):  # without a distribution there is no version
        getattr_("__version__")
