"""Errors that the CLI reports as one line (no traceback) with a non-zero exit."""

SHOW_ALL = 8   # a list of known names up to this long is shown whole in an error


class VlcpError(Exception):
    """A user-facing error: bad config field, missing file, unreadable input."""


class ConfigError(VlcpError, ValueError):
    """A config field is unknown, of the wrong type or out of range; the message names it."""


class NonFiniteError(VlcpError, FloatingPointError):
    """A loss, weight or feature is NaN or infinite: the run stops before anything is written
    from that state (the last good checkpoint stays)."""


def did_you_mean(name, known, prefix: str = "") -> str:
    """' (did you mean: a, b?)' naming the (up to three) known names closest to `name`, each after
    `prefix`; '' when none is close."""
    import difflib

    known = [k for k in dict.fromkeys(known) if isinstance(k, str)]
    close = difflib.get_close_matches(name, known, n=3, cutoff=0.6) if isinstance(name, str) else []
    return f" (did you mean: {', '.join(prefix + c for c in close)}?)" if close else ""


def unknown_name(kind: str, name, known, listing: str) -> str:
    """The message for `name` not among `known` (names of this `kind`): the closest known names, then
    all of them if they are few, else how many there are and `listing`, where to see them."""
    known = list(dict.fromkeys(known))
    hint = did_you_mean(name, known)
    rest = f"known: {', '.join(known) or 'none'}" if len(known) <= SHOW_ALL else f"{len(known)} known ({listing})"
    return f"unknown {kind} {name!r}{hint}; {rest}"


def require_finite(x, what: str):
    """`x` (a tensor) if every value is finite, else a `NonFiniteError` naming `what`."""
    import torch

    bad = ~torch.isfinite(x)
    if bool(bad.any()):
        rows = int(bad.reshape(len(x), -1).any(1).sum()) if x.ndim > 1 else int(bad.sum())
        raise NonFiniteError(f"{what}: {rows} of {len(x)} rows are NaN or infinite (the model's weights or "
                             "activations blew up: a lower train.lr or train.grad_clip may help)")
    return x
