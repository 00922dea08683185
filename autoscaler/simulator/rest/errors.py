"""Flink's REST error answers: the status, and the stringified Java exception Flink puts in ``errors``.

The handlers raise ``HttpError``; ``handle`` turns it into ``{"errors": [message]}``.
"""

from __future__ import annotations

__all__ = ["HANDLER_EXCEPTION", "NOT_FOUND_EXCEPTION", "HttpError", "bad_parameter", "stringified"]

_HANDLER = "org.apache.flink.runtime.rest.handler"
HANDLER_EXCEPTION = f"{_HANDLER}.RestHandlerException"
NOT_FOUND_EXCEPTION = "org.apache.flink.runtime.rest.NotFoundException"


class HttpError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def bad_parameter(kind: str, name: str, value: str) -> HttpError:
    return HttpError(
        400,
        "Bad request, could not parse parameters: "
        f'Cannot resolve {kind} parameter ({name}) from value "{value}".',
    )


def stringified(exception: str, message: str, frame: str) -> str:
    """Flink puts the stringified exception, stack and all, into ``errors`` (two frames here).

    ``frame`` is ``"<package.Class>.<method>:<line>"`` below ``org.apache.flink.runtime.rest.handler``.
    """
    where, line = frame.rsplit(":", 1)
    qualified_class, method = where.rsplit(".", 1)
    simple = qualified_class.rsplit(".", 1)[-1]
    return (
        f"{exception}: {message}\n\tat {_HANDLER}.{qualified_class}.{method}({simple}.java:{line})"
        f"\n\tat {_HANDLER}.AbstractRestHandler.respondToRequest(AbstractRestHandler.java:85)"
    )
