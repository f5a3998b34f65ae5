"""Errors that the CLI reports as one line (no traceback) with a non-zero exit."""


class VlcpError(Exception):
    """A user-facing error: bad config field, missing file, unreadable input."""


class ConfigError(VlcpError, ValueError):
    """A config field is unknown, of the wrong type or out of range; the message names it."""
