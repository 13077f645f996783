"""The one error the query engine raises.

Theory of operation: every problem found while compiling a query text (bad
token, unexpected token, unknown function, unbound name, unsupported form) is a
`QueryError` carrying the character offset where it was found. The message
always names the place as "line L, column C" so a user can find it, and says
what was expected. Execution never raises: type errors inside expressions
evaluate to `undefined`, as in the service. The gateway maps QueryError to
HTTP 400 (BadRequest).
"""

from __future__ import annotations


def line_and_column(text: str, offset: int) -> tuple[int, int]:
    """1-based line and column of a character offset in text."""
    offset = max(0, min(offset, len(text)))
    line = text.count("\n", 0, offset) + 1
    column = offset - (text.rfind("\n", 0, offset) + 1) + 1
    return line, column


class QueryError(ValueError):
    """A query that cannot be compiled. `position` is a 0-based offset."""

    def __init__(self, message: str, position: int = 0):
        super().__init__(message)
        self.message = message
        self.position = position

    @classmethod
    def at(cls, text: str, offset: int, what: str) -> "QueryError":
        """Build an error whose message names line, column and offset."""
        line, column = line_and_column(text, offset)
        return cls(f"Syntax error at line {line}, column {column} (offset {offset}): {what}", offset)
