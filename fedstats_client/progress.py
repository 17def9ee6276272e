"""How a wait shows its progress: one line rewritten in place on a terminal (stderr), one
display updated in place in Jupyter (``IPython.display``, when IPython runs a kernel), one line
per change when stderr is a file or pipe (a log stays readable). IPython is never required."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any, Protocol


class Progress(Protocol):
    def update(self, line: str) -> None: ...

    def close(self) -> None: ...


class Silent:
    def update(self, line: str) -> None:
        pass

    def close(self) -> None:
        pass


class Calls:
    """A caller's function, given each line."""

    def __init__(self, say: Callable[[str], None]) -> None:
        self.say = say

    def update(self, line: str) -> None:
        self.say(line)

    def close(self) -> None:
        pass


class Terminal:
    """One line on stderr, rewritten in place when stderr is a terminal."""

    def __init__(self) -> None:
        self.stream = sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.width = 0

    def update(self, line: str) -> None:
        if self.tty:
            # Pad over the previous line's tail; no newline until the wait ends.
            self.stream.write("\r" + line.ljust(self.width))
            self.width = len(line)
        else:
            self.stream.write(line + "\n")
        self.stream.flush()

    def close(self) -> None:
        if self.tty and self.width:
            self.stream.write("\n")
            self.stream.flush()


class Notebook:
    """One output in a Jupyter cell, updated in place."""

    def __init__(self, display: Any, text: Any) -> None:
        self._text = text
        self._handle = display(text(""), display_id=True)

    def update(self, line: str) -> None:
        if self._handle is not None:
            self._handle.update(self._text(line))

    def close(self) -> None:
        pass


def _in_kernel() -> bool:
    """Whether this runs in a Jupyter kernel (IPython imported by it, not merely installed)."""
    ipython = sys.modules.get("IPython")
    if ipython is None:
        return False
    shell = ipython.get_ipython()
    return shell is not None and getattr(shell, "kernel", None) is not None


def progress_for(progress: bool | Callable[[str], None]) -> Progress:
    """``False``: nothing; ``True``: a notebook display in Jupyter, else stderr; a function:
    called with each line."""
    if progress is False:
        return Silent()
    if callable(progress):
        return Calls(progress)
    if _in_kernel():
        from IPython.display import Pretty, display

        return Notebook(display, Pretty)
    return Terminal()
