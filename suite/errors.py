"""Errors a user can act on. The CLI prints them on one line and exits non-zero."""


class RaceError(Exception):
    """A problem with the user's input or environment: message names it, hint says the fix."""

    exit_code = 2

    def __init__(self, message: str, hint: str | None = None):
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return self.message if not self.hint else f"{self.message} ({self.hint})"
