"""The one error type of the data package."""

from __future__ import annotations


class DataError(ValueError):
    """A dataset that cannot be used as it is; the message says what is wrong and where (file, line, row).

    It subclasses ValueError so callers that already catch ValueError for bad input keep working; the studio
    shows the message as is, so it never carries a traceback.
    """


def render_error(source: str, number: int, message: str) -> DataError:
    """The error for a row the chat template cannot render (its raise_exception, a syntax error, …)."""
    return DataError(f"{source} row {number}: cannot render it with the chat template: {message}")


def kind_of(value: object) -> str:
    """How a JSON value reads in a message: 'a string', 'a list', 'null', ..."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    names = {str: "a string", list: "a list", dict: "an object"}
    return names.get(type(value), f"a {type(value).__name__}")
