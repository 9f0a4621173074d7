"""The lifetime every wrapper of an owned C handle shares (Context, EPGroup,
Layer, Model, QuantConfig, Checkpoint): ``handle`` raises BAD_STATE once
closed; close() destroys what was made from the object first, then the
object, and is idempotent; ``with`` and garbage collection close it."""

from __future__ import annotations

import threading
from typing import TypeVar

from ._library import lib
from .errors import FusedMoEError

_Self = TypeVar("_Self", bound="Owned")


class Owned:
    """Subclasses set ``_h`` in their constructor and name:

    - ``_destroy``: the C function that destroys the handle;
    - ``_noun``: what "the ... is closed" calls the object (default: the
      class name);
    - ``_dependents``: attributes holding the objects made from this one
      (weak sets), closed first and in that order;
    - ``_lock``: a ``threading.Lock`` where close() may race another thread.
    """

    _destroy = ""
    _noun = ""
    _dependents: tuple[str, ...] = ()
    # Class defaults: a constructor that failed before setting them leaves
    # an object whose close() finds nothing to do.
    _h: int | None = None
    _lock: threading.Lock | None = None

    @property
    def handle(self) -> int:
        """The C handle (fmoe_context*, fmoe_layer*, ...) for code that calls
        the C API itself."""
        if self._h is None:
            raise FusedMoEError(FusedMoEError.BAD_STATE, f"the {self._noun or type(self).__name__} is closed")
        return self._h

    def close(self) -> None:
        """Close what was made from this object, then destroy it. Idempotent."""
        if self._lock is None:
            self._close_unlocked()
        else:
            with self._lock:
                self._close_unlocked()

    def _close_unlocked(self) -> None:
        if self._h is None:
            return
        for attr in self._dependents:
            for dependent in list(getattr(self, attr)):
                dependent.close()
        getattr(lib(), self._destroy)(self._h)
        self._h = None

    def __enter__(self: _Self) -> _Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass
