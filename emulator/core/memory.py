"""What stored state asks of the interpreter to stay cheap: two calls the runtime hands the core.

Theory of operation. A store holds one Version per item in every region, so a million items are
millions of objects, and two services of the interpreter keep them cheap:

* `untrack(obj)` stops the cyclic garbage collector walking an object that holds atoms only
  (store.py: a settled Version can never be part of a cycle, so a full collection need not walk
  it; CPython's own PyObject_GC_UnTrack, the call the collector uses on tuples and dicts);
* `intern(text)` gives back the one shared copy of a string (documents.py: every item of a
  logical partition shares its partition key's JSON instead of holding its own).

Reaching the collector and the intern table takes ctypes and sys, which the sans-I/O core does
not import; the runtime installs the interpreter's calls when it starts (emulator/interpreter.py), and
so do the simulator and whatever else builds an account to keep (benchmarks, tests). Until then
`untrack` does nothing and `intern` returns its argument: every result is the same, only the
collector walks more and equal keys are held twice.

Invariant: `untrack` is called only on objects that hold atoms only (ints, strings, bytes, None,
tuples of those), never on one that may later hold a container: an untracked object in a cycle
would never be collected.
"""


def _keep_tracked(obj) -> None:
    """Leave obj to the collector."""


def _own_copy(text: str) -> str:
    return text


untrack = _keep_tracked
intern = _own_copy


def install(untrack_call, intern_call) -> None:
    """Use the interpreter's calls from now on (emulator/interpreter.py passes them in at start-up)."""
    global untrack, intern
    untrack, intern = untrack_call, intern_call
