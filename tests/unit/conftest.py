"""The unit tests' process keeps stored state as an emulator's does: the interpreter's untrack
and intern calls installed before any account is built (core/memory.py; an emulator installs them
at start-up, the simulator when it builds its world), so what a test asserts of the collector
holds for every version in the process, whichever test made it."""
from regionlab.emulator import interpreter

interpreter.install()
