"""GAMUT as an inspect_ai task: `inspect eval gamut_inspect/task.py` (see task.py)."""

from .task import gamut_task

__all__ = ["gamut_task"]
