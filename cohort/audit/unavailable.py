"""The exception every column raises when it cannot run here: its own module, so that the
columns (columns.py, torch_column.py) import it without importing each other."""


class Unavailable(Exception):
    """The column cannot run here (reason in the message)."""
