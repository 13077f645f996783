"""The registry of built-in (system) functions.

Theory of operation: function names are case-insensitive, so the registry is
keyed by upper-case name and built once at import from the per-family tables
(`string_functions`, `math_functions`, `array_functions`, `datetimes`,
`spatial_functions`). The
compiler looks a name up once per call site and checks the argument count
there, so an unknown function or a wrong arity is a compile-time QueryError
and evaluation never searches the registry. Functions flagged `needs_now`
receive the execution's now_ms as an extra first argument.
"""

from __future__ import annotations

from typing import Callable, NamedTuple

from regionlab.emulator.core.query import array_functions, datetimes, math_functions, spatial_functions, string_functions


class FunctionSpec(NamedTuple):
    fn: Callable
    min_args: int
    max_args: int
    needs_now: bool = False


def _build() -> dict[str, FunctionSpec]:
    registry: dict[str, FunctionSpec] = {}
    for table in (string_functions.TABLE, math_functions.TABLE, array_functions.TABLE, datetimes.TABLE,
                  spatial_functions.TABLE):
        for name, entry in table.items():
            registry[name] = FunctionSpec(*entry)
    return registry


REGISTRY = _build()


def lookup_function(name: str) -> FunctionSpec | None:
    return REGISTRY.get(name.upper())
