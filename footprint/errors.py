"""User-facing errors: each names the file, the key and what was expected.

The CLI turns these into one line on stderr and exit code 2, with no traceback.
"""

from __future__ import annotations


class FootprintError(Exception):
    """A mistake in user input (scenario, run directory, CLI argument)."""

    def __init__(self, message: str, file: str | None = None, key: str | None = None) -> None:
        self.file, self.key, self.detail = file, key, message
        where = ": ".join(part for part in (file, key) if part)
        super().__init__(f"{where}: {message}" if where else message)


class ScenarioError(FootprintError):
    """A scenario YAML that cannot be used as written."""


class UnknownGpuError(FootprintError):
    """A GPU name that no catalogue card answers to."""


class FootprintWarning(UserWarning):
    """Something footprint could not use and worked around (a bad `track()` argument: the default is used and the
    run's notes say so). Warned, never raised: the training goes on."""
