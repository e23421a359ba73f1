"""Errors a user can fix: printed as one line, exit code 1, never a traceback."""


class UserError(Exception):
    """Bad input: an inventory, a variable, a flag, a missing file, a missing privilege."""
