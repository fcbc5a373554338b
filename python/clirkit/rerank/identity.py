"""The cache identity of a callable backend: its module, qualified name and a digest of what decides its
answers (see :class:`clirkit.rerank.backends.CallableBackend`)."""

from __future__ import annotations

import functools
import hashlib
import types
from typing import Callable

from clirkit._native import InvalidInputError

__all__ = ["derived_identity"]


class _Undigestable(Exception):
    """A value whose content a digest cannot pin down: its state or its repr is not stable."""


# Types whose repr is their whole value, the same in every process.
_PLAIN_TYPES = (type(None), type(Ellipsis), bool, int, float, complex, str, bytes)


def derived_identity(fn: Callable) -> str:
    """``module.qualname#digest`` of what decides ``fn``'s answers (see :class:`CallableBackend`)."""
    digest = hashlib.sha256()
    try:
        _digest(digest, fn, "the callable", set())
    except _Undigestable as err:
        raise InvalidInputError(
            f"cannot derive a cache identity for {fn!r}: {err}, so answers cached for it could be "
            "confused with another backend's; pass CallableBackend(fn, identity='...') naming the "
            "model and settings behind it"
        ) from None
    name = getattr(fn, "__qualname__", None) or type(fn).__qualname__
    return f"{getattr(fn, '__module__', None)}.{name}#{digest.hexdigest()[:16]}"


def _digest(digest, value: object, where: str, active: set) -> None:
    """Feed ``value`` into ``digest``; ``where`` names it in errors, ``active`` holds the functions
    being digested (a function reaching itself through its closure is fed once)."""
    kind = type(value)
    if kind in _PLAIN_TYPES:
        digest.update(repr((kind.__name__, value)).encode("utf-8"))
    elif kind is tuple:
        digest.update(f"tuple {len(value)}".encode())
        for i, item in enumerate(value):
            _digest(digest, item, f"{where}[{i}]", active)
    elif kind is frozenset:
        # Iteration order follows string hashes, which vary between processes: sort the parts.
        parts = []
        for item in value:
            part = hashlib.sha256()
            _digest(part, item, f"an element of {where}", active)
            parts.append(part.hexdigest())
        digest.update(repr(("frozenset", sorted(parts))).encode())
    elif kind is types.CodeType:
        digest.update(repr(("code", value.co_code, value.co_names)).encode())
        _digest(digest, value.co_consts, f"a constant of {where}", active)
    elif kind is types.FunctionType:
        if id(value) in active:
            digest.update(b"recursion")
            return
        active.add(id(value))
        name = value.__qualname__
        digest.update(repr(("function", name)).encode())
        _digest(digest, value.__code__, name, active)
        _digest(digest, value.__defaults__, f"a default argument of {name}", active)
        keyword_defaults = tuple(sorted((value.__kwdefaults__ or {}).items()))
        _digest(digest, keyword_defaults, f"a default argument of {name}", active)
        for variable, cell in zip(value.__code__.co_freevars, value.__closure__ or ()):
            try:
                captured = cell.cell_contents
            except ValueError:  # a variable the enclosing function has not assigned yet
                digest.update(b"empty cell")
                continue
            _digest(digest, captured, f"closure variable '{variable}' of {name}", active)
        active.discard(id(value))
    elif kind is types.MethodType:
        _digest(digest, value.__func__, where, active)
        _digest(digest, value.__self__, f"the self bound to {value.__qualname__}", active)
    elif kind is functools.partial:
        _digest(digest, value.func, f"the function of {where}", active)
        _digest(digest, value.args, f"an argument of {where}", active)
        _digest(digest, tuple(sorted(value.keywords.items())), f"an argument of {where}", active)
    else:
        raise _Undigestable(f"{where} is a {kind.__module__}.{kind.__qualname__}")
