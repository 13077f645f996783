"""Gives the core the interpreter's calls its stored state relies on (core/memory.py says which and
why): CPython's PyObject_GC_UnTrack, and sys.intern. Installed when an emulator starts, and by the
simulator and anything else that builds an account to keep; it lives beside the layers, not in
the runtime, so that the simulator needs nothing of the runtime."""
import ctypes
import sys

from .core import memory

_gc_untrack = ctypes.pythonapi.PyObject_GC_UnTrack     # the collector's own call
_gc_untrack.argtypes = (ctypes.py_object,)
_gc_untrack.restype = None


def install() -> None:
    memory.install(_gc_untrack, sys.intern)
