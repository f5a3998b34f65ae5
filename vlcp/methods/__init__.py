"""Continual methods, one file each, registered by name."""
from __future__ import annotations

from vlcp.errors import ConfigError
from vlcp.methods.base import Batch, Method, TaskContext

_REGISTRY: dict[str, type[Method]] = {}


def register(cls: type[Method]) -> type[Method]:
    _REGISTRY[cls.name] = cls
    return cls


def get_method(name: str) -> type[Method]:
    if name not in _REGISTRY:
        raise ConfigError(f"method.name: unknown method {name!r}; known: {', '.join(sorted(_REGISTRY))}")
    return _REGISTRY[name]


def available_methods() -> list[str]:
    return sorted(_REGISTRY)


from vlcp.methods import afec, cll_codaprompt, cll_der, cll_dualprompt, cll_er, cll_joint, cll_lora, cll_mla, cll_oewc, cll_ptuning, cllclip, co2l, ctp, ctp_er, er, ewc, geodl, icarl, incclip, jointt, kmeans, lucir, lwf, mas, mof, rwalk, seqf, si, ucir  # noqa: E402,F401  (register the built-in methods)
from vlcp.methods import bitfit, dora, ema_merge, ft_merge, galore, lnfit, locked_image, locked_text, lora, vera, zs_merge  # noqa: E402,F401  (FoMo-in-Flux)

__all__ = ["Batch", "Method", "TaskContext", "available_methods", "get_method", "register"]
