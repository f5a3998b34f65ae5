"""Numeric config fields with declared ranges: `ranged(default, ge=/gt=/le=/lt=)` puts a `Range`
in a dataclass field's metadata, `check_values` / `check_ranges` enforce it and raise `ConfigError`
naming the field. The experiment config (`vlcp.config`) and every method's `Config` use them; this
module imports nothing of vlcp but its errors, so a method's module never needs the experiment
config to declare its own settings."""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any

from vlcp.errors import ConfigError


@dataclass(frozen=True)
class Range:
    """The values a numeric field (or each item of a list field) may take."""
    ge: float | None = None
    gt: float | None = None
    le: float | None = None
    lt: float | None = None
    nonzero: bool = False
    note: str = ""                   # why, e.g. "contrastive" (printed after the range)

    def ok(self, v) -> bool:         # NaN fails every comparison, so it is never ok
        return ((self.ge is None or v >= self.ge) and (self.gt is None or v > self.gt)
                and (self.le is None or v <= self.le) and (self.lt is None or v < self.lt)
                and (not self.nonzero or v != 0))

    def __str__(self) -> str:
        lo = f"[{self.ge}" if self.ge is not None else f"({self.gt}" if self.gt is not None else None
        hi = f"{self.le}]" if self.le is not None else f"{self.lt})" if self.lt is not None else None
        if lo and hi:
            text = f"in {lo}, {hi}"
        elif lo:
            text = f">= {self.ge}" if self.ge is not None else f"> {self.gt}"
        elif hi:
            text = f"<= {self.le}" if self.le is not None else f"< {self.lt}"
        else:
            text = ""
        if self.nonzero:
            text = f"{text} and non-zero" if text else "non-zero"
        return text + (f" ({self.note})" if self.note else "")


def ranged(default: Any = dataclasses.MISSING, *, factory: Any = dataclasses.MISSING, ge=None, gt=None, le=None,
           lt=None, nonzero: bool = False, note: str = "", finite: bool = True) -> Any:
    """A dataclass field whose value (each item, for a list; unless None, for an Optional) must lie
    in the range; `finite=False` would let it be NaN or infinite (no field does)."""
    meta = {"range": Range(ge, gt, le, lt, nonzero, note), "finite": finite}
    if factory is not dataclasses.MISSING:
        return field(default_factory=factory, metadata=meta)
    return field(default=default, metadata=meta)


def field_range(f: dataclasses.Field) -> Range | None:
    """The declared range of a dataclass field (None: a non-numeric field)."""
    return f.metadata.get("range")


def check_range(value: Any, f: dataclasses.Field, path: str) -> None:
    if value is None or isinstance(value, (bool, str)):
        return
    if isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            check_range(v, f, f"{path}[{i}]")
        return
    if not isinstance(value, (int, float)):
        return
    if isinstance(value, float) and not math.isfinite(value) and f.metadata.get("finite", True):
        raise ConfigError(f"{path}: must be a finite number, got {value}")
    rng = field_range(f)
    if rng is not None and not rng.ok(value):
        raise ConfigError(f"{path}: must be {rng}, got {value!r}")


def check_values(cls: type, values: dict, prefix: str = "") -> None:
    """Every value in `values` (field name -> value) within its field's declared range."""
    for f in dataclasses.fields(cls):
        if f.name in values:
            check_range(values[f.name], f, f"{prefix}{f.name}")


def check_ranges(obj: Any) -> None:
    """`check_values` on a dataclass instance (call it first in `__post_init__`)."""
    check_values(type(obj), {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)})
