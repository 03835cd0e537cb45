"""Errors of the control plane."""

from __future__ import annotations

from ferry.exceptions import FerryError


class ControlError(FerryError):
    """A refused request: ``status`` is the HTTP status code it maps to (400, 404, 409, 422)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
