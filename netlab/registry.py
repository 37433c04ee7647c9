"""Name registries: the command line, notebooks and sweeps look things up by name.

A registry maps a name to a factory (usually a class). Modules register
themselves with the ``register`` decorator when imported, so adding a policy is
one new module and one import line, never an if/elif chain.
"""

from __future__ import annotations

from typing import Callable, Generic, TypeVar

from .errors import UnknownNameError, unknown_name

T = TypeVar("T")


class Registry(Generic[T]):
    def __init__(self, what: str):
        self.what = what
        self._items: dict[str, Callable[..., T]] = {}
        self._docs: dict[str, str] = {}

    def register(self, name: str, doc: str | None = None):
        def deco(factory):
            if name in self._items:
                raise ValueError(f"{self.what} {name!r} registered twice")
            self._items[name] = factory
            text = doc or (factory.__doc__ or "").strip().splitlines()
            self._docs[name] = text if isinstance(text, str) else (text[0] if text else "")
            return factory

        return deco

    def create(self, name: str, **kwargs) -> T:
        return self.get(name)(**kwargs)

    def get(self, name: str, field: str | None = None) -> Callable[..., T]:
        """The factory registered as ``name``; else :class:`~netlab.errors.UnknownNameError` (an ``InputError``
        and a ``KeyError``) naming ``field`` (when given) and every registered name."""
        try:
            return self._items[name]
        except (KeyError, TypeError):  # TypeError: an unhashable value (a list from a YAML file)
            raise UnknownNameError(unknown_name(self.what, name, self.names(), field)) from None

    def names(self) -> list[str]:
        return sorted(self._items)

    def describe(self) -> dict[str, str]:
        return {n: self._docs[n] for n in self.names()}

    def __contains__(self, name) -> bool:
        return isinstance(name, str) and name in self._items
