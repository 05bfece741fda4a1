"""Zero-code step counting for `footprint run --count-steps`: the child's optimizer steps reach the run record.

Installed at the child's start-up (``childhook/sitecustomize.py``) without importing torch: a
meta-path finder waits for ``torch.optim.optimizer`` to load, then registers torch's global
optimizer-step post-hook. Each ``optimizer.step()`` of the first optimizer the process steps counts
one step on a tracker attached to the parent run (a second optimizer, e.g. a GAN's discriminator, is
not counted twice). Tokens and FLOPs stay unknown (null); a tracker or callback the script opens
itself counts them, and then the hook stands aside.
"""

from __future__ import annotations

import contextlib
import importlib.abc
import importlib.util
import sys
from typing import Any

MODULE = "torch.optim.optimizer"
SOURCE = "optimizer hook"
_state: dict[str, Any] = {"tracker": None, "first": None}


def install() -> None:
    if MODULE in sys.modules:
        _register(sys.modules[MODULE])
    elif not any(isinstance(f, _AfterImport) for f in sys.meta_path):
        sys.meta_path.insert(0, _AfterImport())


class _AfterImport(importlib.abc.MetaPathFinder):
    """Finds nothing itself; wraps the real loader of torch.optim.optimizer to register the hook after it runs."""

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if name != MODULE:
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.loader is not None and hasattr(spec.loader, "exec_module"):
            run = spec.loader.exec_module

            def exec_module(module: Any) -> None:
                run(module)
                _register(module)

            spec.loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


def _register(module: Any) -> None:
    with contextlib.suppress(Exception):
        module.register_optimizer_step_post_hook(_on_step)


def _on_step(optimizer: Any, args: Any, kwargs: Any) -> None:
    try:
        if _state["first"] is None:
            _state["first"] = id(optimizer)
        if id(optimizer) != _state["first"]:
            return
        from footprint.tracking import tracker as tr

        if any(t.source != SOURCE and not t._stopped for t in tr._ACTIVE):
            return  # the script counts its own steps (footprint.track or a callback)
        t = _state["tracker"]
        if t is None:
            t = tr.Tracker(name="optimizer-hook", host=False, handle_sigterm=False, source=SOURCE).start()
            _state["tracker"] = t
        t.step()
    except Exception:
        pass
