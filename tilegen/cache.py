"""The compile cache of ``tilegen.compile``: cubin + PTX per key, checksummed.

Location: ``$TILEGEN_CACHE_DIR``, default ``~/.cache/tilegen``. The key (:func:`key_for`) is
cuTile Python's cubin cache key (``cutile_cache._cache.cache_key``: SHA-256 over a version byte,
the compiler version text, the arch, ``opt_level | device_debug << 8 | lineinfo << 9``, the
input bytes, no preview features, no linker inputs), where the compiler version text is:

* ``tilegen-tileiras --version`` (its ``Build`` line fingerprints tilegen's sources),
* the ptxas version (``ptxas --version`` and the binary's path, size and mtime), and
* every field of the :class:`~tilegen.runtime.options.CompileOptions` (target with its
  ``a``/``f`` suffix, opt level, num_stages, wgmma / cp.async / pipelining, lineinfo,
  device_debug, sanitize, verify).

An entry is one file, ``<key[:2]>/<key>.entry``: ``TGCACHE1``, the SHA-256 of the rest, the PTX
length, the PTX, the cubin. It is written to a temporary file and renamed into place, and a
lookup checks the checksum and the cubin's ELF magic: a damaged entry (truncated, edited) is
deleted and the module recompiled, never served.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Optional

_CACHE_VERSION = b"\x01"  # as cutile_cache._cache._CACHE_VERSION
_ENTRY_MAGIC = b"TGCACHE1"
_ELF_MAGIC = b"\x7fELF"


def cache_dir() -> Path:
    env = os.environ.get("TILEGEN_CACHE_DIR")
    if env:
        return Path(env).expanduser()
    return Path.home() / ".cache" / "tilegen"


def cache_key(
    version: str,
    sm_arch: str,
    opt_level: int,
    data: bytes,
    device_debug: bool = False,
    lineinfo: bool = False,
) -> str:
    """cuTile's ``cutile_cache._cache.cache_key`` layout (no preview features, no linker
    inputs); ``lineinfo`` shares the flags word with ``device_debug`` (bit 9)."""
    import hashlib

    def u32(x: int) -> bytes:
        return int.to_bytes(x, 4, byteorder="big", signed=False)

    h = hashlib.sha256()
    h.update(_CACHE_VERSION)
    for field_bytes in (version.encode(), sm_arch.encode()):
        h.update(u32(len(field_bytes)))
        h.update(field_bytes)
    h.update(u32(opt_level | (int(device_debug) << 8) | (int(lineinfo) << 9)))
    h.update(u32(len(data)))
    h.update(data)
    h.update(u32(0))  # preview features
    h.update(u32(0))  # linker inputs
    return h.hexdigest()


def ptxas_id(directory: Path) -> str:
    """The ptxas version text (runtime/ptxas.ptxas_version), memoised in ``directory`` by the
    binary's path, size and mtime so a cache hit does not start ptxas."""
    from tilegen.runtime.ptxas import find_ptxas, ptxas_version

    path = find_ptxas()
    if path is None:
        return "none"
    try:
        st = os.stat(path)
    except OSError:
        return "none"
    stamp = f"{path}\t{st.st_size}\t{st.st_mtime_ns}\t"
    memo = directory / "ptxas-versions"
    try:
        for line in memo.read_text().splitlines():
            if line.startswith(stamp):
                return line[len(stamp) :]
    except (OSError, UnicodeDecodeError):
        pass
    version = ptxas_version()
    try:
        directory.mkdir(parents=True, exist_ok=True)
        with open(memo, "a") as f:
            f.write(stamp + version.replace("\n", " ") + "\n")
    except OSError:
        pass
    return version


def key_for(options, data: bytes, compiler_version: str, directory: Path) -> str:
    """The cache key of compiling ``data`` with ``options`` (see the module docstring)."""
    version = f"{compiler_version}ptxas: {ptxas_id(directory)}\noptions: {options.fingerprint()}\n"
    return cache_key(
        version, options.target.name, options.opt_level, data, options.device_debug,
        options.lineinfo,
    )  # fmt: skip


def entry_path(directory: Path, key: str) -> Path:
    return directory / key[:2] / f"{key}.entry"


def lookup(directory: Path, key: str) -> Optional[tuple[str, bytes]]:
    """``(ptx, cubin)`` of a sound entry; a damaged one is deleted and None returned."""
    import hashlib

    path = entry_path(directory, key)
    try:
        blob = path.read_bytes()
    except OSError:
        return None
    head = len(_ENTRY_MAGIC) + 32
    ok = blob.startswith(_ENTRY_MAGIC) and len(blob) >= head + 4
    if ok and hashlib.sha256(blob[head:]).digest() == blob[len(_ENTRY_MAGIC) : head]:
        n = int.from_bytes(blob[head : head + 4], "big")
        ptx, cubin = blob[head + 4 : head + 4 + n], blob[head + 4 + n :]
        if len(ptx) == n and cubin.startswith(_ELF_MAGIC):
            try:
                return ptx.decode(), cubin
            except UnicodeDecodeError:
                pass
    try:
        path.unlink()
    except OSError:
        pass
    return None


def store(directory: Path, key: str, ptx: str, cubin: bytes) -> None:
    """Write an entry atomically (a temporary file renamed into place); errors are ignored (a
    cache that cannot be written is no cache, not an error)."""
    import hashlib
    import tempfile

    path = entry_path(directory, key)
    text = ptx.encode()
    payload = len(text).to_bytes(4, "big") + text + cubin
    blob = _ENTRY_MAGIC + hashlib.sha256(payload).digest() + payload
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(blob)
            os.replace(tmp, path)
        except OSError:
            os.unlink(tmp)
            raise
    except OSError:
        pass


__all__ = ["cache_dir", "cache_key", "entry_path", "key_for", "lookup", "store"]
