"""Errors that the CLI reports as one line (no traceback) with a non-zero exit."""


class VlcpError(Exception):
    """A user-facing error: bad config field, missing file, unreadable input."""


class ConfigError(VlcpError, ValueError):
    """A config field is unknown, of the wrong type or out of range; the message names it."""


class NonFiniteError(VlcpError, FloatingPointError):
    """A loss, weight or feature is NaN or infinite: the run stops before anything is written
    from that state (the last good checkpoint stays)."""


def require_finite(x, what: str):
    """`x` (a tensor) if every value is finite, else a `NonFiniteError` naming `what`."""
    import torch

    bad = ~torch.isfinite(x)
    if bool(bad.any()):
        rows = int(bad.reshape(len(x), -1).any(1).sum()) if x.ndim > 1 else int(bad.sum())
        raise NonFiniteError(f"{what}: {rows} of {len(x)} rows are NaN or infinite (the model's weights or "
                             "activations blew up: a lower train.lr or train.grad_clip may help)")
    return x
