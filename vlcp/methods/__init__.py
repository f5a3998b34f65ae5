"""Continual methods, one file each, looked up by name through `vlcp.registry.METHODS` (a method's
module is imported when a run or a config names it)."""
from __future__ import annotations

from vlcp import registry
from vlcp.methods.base import Batch, Method, TaskContext


def register(cls: type[Method]) -> type[Method]:
    """Class decorator: a built-in method must have its line in `vlcp.registry.METHODS`; a method
    defined outside the package is registered under `cls.name` when its module is imported."""
    registry.add_method(cls.name, cls.__module__, cls.__qualname__)
    return cls


def get_method(name: str) -> type[Method]:
    return registry.load_method(name)


def available_methods() -> list[str]:
    return registry.method_names()


__all__ = ["Batch", "Method", "TaskContext", "available_methods", "get_method", "register"]
