"""Bytecode diagnostics: NVIDIA's reader/writer messages, with the failure cascade as notes."""

from __future__ import annotations

from typing import Optional

from tilegen.runtime.limits import clip_words


class BytecodeError(Exception):
    """A reader or writer failure. ``messages`` holds the innermost message first, then the
    enclosing context messages NVIDIA's tools print after it (``failed to parse operation 3 in
    block.``, ``failed to parse function section`` ...)."""

    def __init__(self, message: str, offset: Optional[int] = None, silent: bool = False):
        text = f"error at offset {offset}: {message}" if offset is not None else message
        text = clip_words(text)  # names and strings from the file can be megabytes long
        super().__init__(text)
        #: ``silent``: NVIDIA fails here without a message of its own, so the first enclosing
        #: context is the first message; ``text`` is used only if no context is added
        self._messages: list[str] = [] if silent else [text]
        self._fallback = text

    def add_context(self, message: str) -> "BytecodeError":
        self._messages.append(clip_words(message))
        return self

    @property
    def messages(self) -> list[str]:
        return self._messages or [self._fallback]

    @property
    def message(self) -> str:
        return self.messages[0]


class BytecodeWriteError(BytecodeError):
    """The IR cannot be encoded (at the requested version); ``op`` is the offending operation."""

    def __init__(self, message: str, op=None, remark_op=None):
        super().__init__(message)
        self.op = op
        #: the offending nested op of a module-level check (reported as remark ``invalid op``)
        self.remark_op = remark_op


def context(message: str, cursor=None):
    """``with context('failed to parse type section'): ...`` adds ``message`` to a
    :class:`BytecodeError` raised inside; with a ``cursor``, prefixed ``error at offset N: ``
    where N is that cursor's position when the error passes (as NVIDIA reports it)."""
    return _Context(message, cursor)


class _Context:
    __slots__ = ("message", "cursor")

    def __init__(self, message: str, cursor=None):
        self.message = message
        self.cursor = cursor

    def __enter__(self):
        return self

    def __exit__(self, etype, exc, tb):
        if isinstance(exc, BytecodeError) and not isinstance(exc, BytecodeWriteError):
            if self.cursor is None:
                exc.add_context(self.message)
            else:
                exc.add_context(f"error at offset {self.cursor.pos}: {self.message}")
        return False
