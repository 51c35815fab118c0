"""The documented limits on input, and a deep stack to run the pipeline on (docs/limits.md).

Python's own limits must never reach the user: the parser and the bytecode reader refuse input
nested deeper than :data:`MAX_NESTING` with a located error, and :func:`deep_stack` runs a
callable on a worker thread whose stack and recursion limit let every stage (parser, verifier,
printer, passes, bytecode writer and reader, lowering, codegen) walk IR that deep recursively.
:func:`clip` shortens the long identifiers and literals a message quotes.
"""

from __future__ import annotations

import gc
import sys
import threading
import time
from typing import Callable, TypeVar

#: Regions, attributes and types nested deeper than this are refused (text and bytecode); real
#: kernels nest a few levels, NVIDIA's tools accept well beyond 1,000.
MAX_NESTING = 4096
#: Stack of the worker thread :func:`deep_stack` runs on (address space; pages are committed
#: only as the stack grows).
STACK_BYTES = 1 << 30
#: Python frames allowed on that thread: every stage recurses a few dozen frames per nesting
#: level at most.
RECURSION_LIMIT = 400_000
#: A word (identifier, literal, type) longer than this is shortened in messages; mangled
#: kernel names run to a few hundred characters.
MAX_QUOTED = 1000
#: Integer literals are refused (located at the literal) above this many bits: far beyond any
#: type (cuda_tile's widest integer is i64), and small enough that every value prints.
MAX_INTEGER_BITS = 12_000
#: While :func:`deep_stack` work runs, the cyclic garbage collector's first generation waits for
#: this many new container objects (CPython's default: 700). A parsed op is ~10 of them, so the
#: default ran a collection every ~70 ops, and the older generations' passes over the growing IR
#: were a third of parsing, verifying and printing 100,000 ops; restored afterwards.
GC_GEN0_THRESHOLD = 10_000
#: ... and a run longer than this (seconds) ends with a full collection: its IR, cyclic garbage
#: by then, would otherwise wait for the next full collection the default thresholds allow
#: (a fraction of the run's own time; short compiles never pay it).
GC_COLLECT_AFTER = 0.5
#: ... i.e. this many decimal digits, or hexadecimal digits after ``0x``
MAX_DECIMAL_DIGITS = 3612  # floor(12000 * log10(2))
MAX_HEX_DIGITS = MAX_INTEGER_BITS // 4


def integer_literal_error(text: str) -> str | None:
    """The message for an integer literal (``123``, ``0x7F``) over the limit, else None."""
    if text[:2] in ("0x", "0X"):
        if len(text) - 2 <= MAX_HEX_DIGITS:
            return None
        digits, limit = len(text) - 2, f"{MAX_HEX_DIGITS} hexadecimal digits"
    else:
        if len(text) <= MAX_DECIMAL_DIGITS:
            return None
        digits, limit = len(text), f"{MAX_DECIMAL_DIGITS} decimal digits"
    return f"integer literal too large: {digits} digits (at most {limit}, {MAX_INTEGER_BITS} bits)"


T = TypeVar("T")

_state = threading.local()
_lock = threading.Lock()
_active = 0
_saved_limit = 0
_saved_gc = (700, 10, 10)


def on_deep_stack() -> bool:
    """Whether this thread is a :func:`deep_stack` worker."""
    return getattr(_state, "deep", False)


def deep_stack(fn: Callable[..., T], *args, **kwargs) -> T:
    """``fn(*args, **kwargs)`` on a thread with a :data:`STACK_BYTES` stack, the recursion
    limit raised to :data:`RECURSION_LIMIT` and the collector's first threshold to
    :data:`GC_GEN0_THRESHOLD` (both restored once no such call is running); results and
    exceptions pass through. Calls made on such a thread run directly."""
    if on_deep_stack():
        return fn(*args, **kwargs)
    global _active, _saved_limit, _saved_gc
    box: dict = {}

    def work() -> None:
        _state.deep = True
        try:
            box["result"] = fn(*args, **kwargs)
        except BaseException as e:  # noqa: BLE001 - re-raised in the caller's thread
            box["error"] = e

    with _lock:
        if _active == 0:
            _saved_limit = sys.getrecursionlimit()
            sys.setrecursionlimit(max(_saved_limit, RECURSION_LIMIT))
            _saved_gc = gc.get_threshold()
            gc.set_threshold(max(_saved_gc[0], GC_GEN0_THRESHOLD), *_saved_gc[1:])
        _active += 1
        old_size = threading.stack_size()
        try:
            threading.stack_size(STACK_BYTES)
            worker = threading.Thread(target=work, name="tilegen-deep-stack", daemon=True)
            worker.start()
        finally:
            threading.stack_size(old_size)
    start = time.perf_counter()
    try:
        worker.join()
    finally:
        with _lock:
            _active -= 1
            if _active == 0:
                sys.setrecursionlimit(_saved_limit)
                gc.set_threshold(*_saved_gc)
                if time.perf_counter() - start > GC_COLLECT_AFTER:
                    gc.collect()  # the IR of a long run is cyclic garbage now: free it at once
    if "error" in box:
        error = box.pop("error")
        raise error.with_traceback(error.__traceback__)
    return box["result"]


def clip(text: str, limit: int = MAX_QUOTED) -> str:
    """``text`` itself, or its start and end around ``...`` plus its length when longer than
    ``limit``."""
    if len(text) <= limit:
        return text
    keep = limit // 2
    return f"{text[:keep]}...{text[-(keep // 4):]} ({len(text)} characters)"


_LONG_WORDS: dict = {}


def clip_words(message: str, limit: int = MAX_QUOTED) -> str:
    """``message`` with every run of more than ``limit`` non-blank characters (an identifier,
    a literal, a type) shortened by :func:`clip`."""
    if len(message) <= limit:
        return message
    import re

    pattern = _LONG_WORDS.get(limit)
    if pattern is None:
        pattern = _LONG_WORDS[limit] = re.compile(r"\S{%d,}" % (limit + 1))
    return pattern.sub(lambda m: clip(m.group(0), limit), message)
