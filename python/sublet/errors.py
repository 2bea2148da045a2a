"""sublet's exceptions: one per kind of failure the C library reports.

    Error                   every failure sublet reports (.status: the C
    │                       library's status name, .message: its text)
    ├── TraceError          an input that cannot be read (.file, .byte,
    │                       .line: where the C library says it failed)
    ├── ConfigError         bad allocator settings (PyTorch's own message)
    ├── ReplayError         the replay could not run (.result: the partial
    │                       document when there is one)
    ├── TuneError           the tuning failed
    ├── ArgumentError       an argument the C library refuses (an event
    │                       index past the trace's end, ...)
    └── LibraryError        the shared library cannot be found or loaded

TraceError, ConfigError and ArgumentError are also ValueErrors, LibraryError is also an
OSError.  Arguments of the wrong type raise TypeError.
"""

from __future__ import annotations

import re
from typing import Any, Optional

__all__ = ["Error", "TraceError", "ConfigError", "ReplayError", "TuneError", "ArgumentError",
           "LibraryError"]


class Error(Exception):
    """A failure reported by sublet's C library."""

    def __init__(self, message: str, status: str = "SUBLET_ERR"):
        super().__init__(message)
        self.message = message
        self.status = status


class TraceError(Error, ValueError):
    """An input that is not a trace sublet can read.

    file: the name the message starts with (the path, "<bytes>", ...);
    byte / line: the offset or line the C library names, else None."""

    def __init__(self, message: str, status: str = "SUBLET_ERR_PARSE"):
        super().__init__(message, status)
        head = message.split(": ", 1)
        self.file: Optional[str] = head[0] if len(head) == 2 else None
        m = re.search(r"\bbyte (\d+)", message)
        self.byte: Optional[int] = int(m.group(1)) if m else None
        m = re.search(r"\bline (\d+)", message)
        self.line: Optional[int] = int(m.group(1)) if m else None


class ConfigError(Error, ValueError):
    """Allocator settings PyTorch would refuse (the message is PyTorch's)."""


class ReplayError(Error):
    """The replay could not run; .result holds what it made, if anything (for
    sublet.replay a ReplayResult: its .error says why)."""

    def __init__(self, message: str, status: str, result: Optional[Any] = None):
        super().__init__(message, status)
        self.result = result


class TuneError(Error):
    """The tuning failed."""


class ArgumentError(Error, ValueError):
    """An argument the C library refuses."""


class LibraryError(Error, OSError):
    """libsublet.so could not be found or loaded."""
