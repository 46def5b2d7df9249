"""The project's error type: every error lib raises on purpose is a `WikigatError`, so a caller (the runner, a
notebook, a script) catches them all with one clause and still tells them apart by their stage's subclass.

A stage's error derives from `WikigatError` and from the built-in error it has always been (`ValueError` for bad
input, `RuntimeError` for a state on disk or a run that cannot go on, `OSError` for a failed write), so code that
caught the built-in one keeps working:

    class DistillError(WikigatError, ValueError): ...
"""

from __future__ import annotations


class WikigatError(Exception):
    """Base of the project's errors; the message is one line naming the input (file, key, node) and the fix."""
