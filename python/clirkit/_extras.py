"""Optional integrations are extras: imported only where used, and a missing one is one clear line."""

from __future__ import annotations

import importlib
from types import ModuleType


class MissingExtraError(ImportError):
    """An optional dependency is not installed; the message names the extra that brings it."""


def require(module: str, extra: str, what: str) -> ModuleType:
    """Import ``module``, or raise :class:`MissingExtraError` saying ``what`` needs it and which
    ``clirkit[extra]`` installs it."""
    try:
        return importlib.import_module(module)
    except ImportError as err:
        missing = err.name or module
        raise MissingExtraError(
            f'{what} needs {missing} (not installed): pip install "clirkit[{extra}]"'
        ) from None
