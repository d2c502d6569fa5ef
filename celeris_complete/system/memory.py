"""Giving freed memory back to the operating system after a large index shrinks.

Python frees the objects of removed files, but the C allocator keeps the pages in partly used arenas
and heaps: a folder of a thousand files indexed and then deleted leaves the server's resident memory
where it was at its peak.  ``release_freed_memory`` (a garbage collection, then glibc's
``malloc_trim``) returns those pages; it is for the indexing thread after a burst of removals, never
for the completion path.  ``trim_heap`` (the trim alone, no collection) is what the language server's
model thread calls every so many completions: contexts of varying size make the allocator keep freed
tensor memory (glibc raises its mmap threshold after large frees), which otherwise shows as resident
memory that grows over a long editing session.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc

_trim = None
try:  # glibc only; elsewhere (musl, macOS, Windows) there is nothing to call and nothing is trimmed
    _libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    _trim = _libc.malloc_trim
    _trim.argtypes = [ctypes.c_size_t]
    _trim.restype = ctypes.c_int
except (OSError, AttributeError):
    _trim = None


def can_trim() -> bool:
    return _trim is not None


def release_freed_memory() -> bool:
    """Collect cycles and hand free heap pages back to the system; True if the allocator released any."""
    gc.collect()
    if _trim is None:
        return False
    return bool(_trim(0))  # ctypes drops the GIL for the call: the model thread goes on meanwhile


def trim_heap() -> bool:
    """Hand free heap pages back to the system, without a garbage collection; True if any were released."""
    return _trim is not None and bool(_trim(0))
