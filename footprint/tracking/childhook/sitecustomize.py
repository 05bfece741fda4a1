"""Loaded at start-up by every Python child of `footprint run --count-steps` (this folder leads its PYTHONPATH).

Installs the optimizer-step counter (footprint.tracking.stepcount), then runs the sitecustomize the
child would have loaded without us, so an environment's own start-up hook still runs. Never raises.
"""

import contextlib
import os
import sys


def _chain() -> None:
    import importlib.machinery
    import importlib.util

    here = os.path.dirname(os.path.abspath(__file__))
    path = [p for p in sys.path if os.path.abspath(p or ".") != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", path)
    if spec is not None and spec.loader is not None and spec.origin != __file__:
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)


try:
    if os.environ.get("FOOTPRINT_COUNT_STEPS"):
        from footprint.tracking.stepcount import install

        install()
except Exception:
    pass
with contextlib.suppress(Exception):
    _chain()
