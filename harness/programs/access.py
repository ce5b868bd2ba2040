"""What a statement does to one buffer: an access, the record each statement kind's `access(s, p)` returns.

Hazard relations (harness.programs.relations) are computed from these records alone: which buffer, read,
written or updated in place (an atomic), and how: the whole buffer, a region of it (its offset and extents where
known), by one thread at an index of its own, or atomically; made element by element in a T.Parallel loop or not;
and by which of the block's threads (a stream's producer warp group, its consumers, or the whole block).
"""
from __future__ import annotations

from dataclasses import dataclass

MODES = ("read", "write", "update")              # update: read and written in place, atomically
HOWS = ("whole", "region", "thread", "atomic")   # thread: each thread at an index of its own (T.get_thread_binding)
WHO = ("block", "producer", "consumers")         # a stream's last 128 threads, the threads before them


@dataclass(frozen=True)
class Access:
    buffer: str
    scope: str               # the buffer's scope ("shared" for a stream's ring)
    mode: str                # MODES
    how: str                 # HOWS
    offset: tuple = ()       # the first element, where known (a global's row counts from its tile's base row)
    extent: tuple = ()       # the extents, where known
    loop: bool = False       # element by element, in a T.Parallel loop of `extent` iterations
    who: str = "block"       # WHO

    @property
    def reads(self) -> bool:
        return self.mode in ("read", "update")

    @property
    def writes(self) -> bool:
        return self.mode in ("write", "update")

    @property
    def partial(self) -> bool:
        """Part of a shared or fragment buffer: the rest keeps what it held."""
        return self.how == "region" and self.scope != "global"


def whole(p, name, mode, loop=False, who="block") -> Access:
    b = p.buffer(name)
    return Access(name, b.scope, mode, "whole", (0,) * len(b.shape), tuple(b.shape), loop, who)


def region(p, name, mode, offset, extent, loop=False, how="region", who="block") -> Access:
    """A region of buffer `name`; all of a local buffer is its whole."""
    b = p.buffer(name)
    if how == "region" and b.local and not any(offset) and tuple(extent) == tuple(b.shape):
        how = "whole"
    return Access(name, b.scope, mode, how, tuple(offset), tuple(extent), loop, who)
