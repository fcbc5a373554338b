"""Read-only attributes of the Python index classes forwarded from their native objects, defined
once (the BM25, impact, approximate impact, dense and multi-vector indexes all use it)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, TypeVar, overload

T = TypeVar("T")


class NativeValue(Generic[T]):
    """A read-only attribute forwarded from the native object of the same name, as a Python value.

    The native object is the owner's ``native`` attribute (every wrapper of a native object names it so).
    Read on the class, it is the descriptor itself (whose ``__doc__`` documents it), as a property
    is; setting it is an error, as it is for a property without a setter."""

    def __init__(self, convert: Callable[[Any], T], doc: str | None = None) -> None:
        self._convert = convert
        self.__doc__ = doc

    def __set_name__(self, owner: type, name: str) -> None:
        self._name = name

    @overload
    def __get__(self, index: None, owner: type | None = None) -> NativeValue[T]: ...
    @overload
    def __get__(self, index: object, owner: type | None = None) -> T: ...
    def __get__(self, index: object, owner: type | None = None) -> T | NativeValue[T]:
        if index is None:
            return self
        return self._convert(getattr(index.native, self._name))  # type: ignore[attr-defined]

    def __set__(self, index: object, value: object) -> None:
        raise AttributeError(f"{self._name!r} of {type(index).__name__!r} is read-only")
