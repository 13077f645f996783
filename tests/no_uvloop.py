"""A pytest plugin (`-p no_uvloop`) for a run without uvloop, as on Windows where it has no wheels:
importing uvloop fails, and REGIONLAB_LOOP=asyncio (set by the caller) makes every process the
run starts choose asyncio's own loop too (client/event_loop.py)."""
import importlib.abc
import sys


class _NoUvloop(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name == "uvloop" or name.startswith("uvloop."):
            raise ModuleNotFoundError(f"No module named {name!r} (a run without uvloop)", name=name)
        return None


sys.meta_path.insert(0, _NoUvloop())
for _name in [m for m in sys.modules if m == "uvloop" or m.startswith("uvloop.")]:
    del sys.modules[_name]
