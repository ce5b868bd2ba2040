"""Compile-only checks on generated CUDA: hazards that need no GPU to see.

vectorized_atomics: an AtomicAddx2/x4 writes N consecutive addresses. That is right only where
N consecutive elements of the atomic's loop land on N consecutive addresses: a global buffer
with an annotated layout (the fragment-matched dQ keeps none adjacent) or an invariant
destination (every row adding into one dSinks cell) must get scalar atomics, and shared memory
has no vector float atomics at all. The kernel family says which buffers are which.

atomics_on_locals: an atomic add whose target is a local scalar or an element of a register array
(TileLang 0.1.6.post2 copies a bounds-checked destination into `condval_N` and adds to the copy;
0.1.15 loads an fp32 global into `G6_local_cast` and adds there) updates nothing in memory: the
contribution is lost.

unwaited_async_loads: a TMA load issued before a loop whose barrier is waited on only inside
that loop. When the loop can run zero times (its bound is symbolic), no thread ever waits for
the load: the kernel reads or reuses the destination while the copy is still in flight (and
may exit with it pending). Where the destination shares shared memory with another buffer,
the late copy overwrites that buffer. A load inside loops is waited on if some wait on its
barrier sits in no loop that the load's own loops do not also run (a producer's ring loop and
its consumer's loop share one bound).

mbarrier_protocol: the barrier handshake, replayed. The kernel body is parsed into its roles
(the branches of a top-level `if` on threadIdx: producer and consumer warps) and their loops,
keeping only barrier operations; each role then runs as a process over concrete trip counts of
the symbolic loops (0, 1, ... past every ring depth), arrivals counting once per thread that
executes them (once per elected group under tl_shuffle_elect). Findings: a barrier waited on or
arrived at but never initialized; a wait that no arrival ever completes (deadlock: e.g. a ring
slot nobody primed); two successive waits of one role on one slot for the same parity
with a phase completed in between (the second returns on a stale phase); a wait on a barrier that TMA loads complete passing
before any phase of it completed (reading a slot before its data landed); more arrivals in one
phase than the barrier was initialized for.

reads_after_release: a pipeline's consumer reads a shared buffer after it released that buffer's
stage in the same loop iteration. A buffer belongs to the stage of a barrier when something writes
it (a store, cp.async or TMA load) after a wait on that barrier (the producer's refill); the
release is a plain `.arrive()` on the same barrier (the producer's and consumer's phase counters
are taken as one). TileLang 0.1.15's `T.Pipelined` masked forward releases K's stage after QK^T,
then reads that stage's mask_s.

unsynced_tma_stores: a TMA store of a shared buffer issued by one elected thread after the block's
threads wrote that buffer, with no barrier (`__syncthreads`, `__sync_thread_partial`) in between:
the bulk copy may read rows other warps have not written yet (TileLang 0.1.12's warp-specialized
O epilogue, reproducer 80929a5b6a72); a barrier in another branch of an if-else runs on other threads
and does not count (bac98dcbc2c6). Nor without a fence.proxy.async between the writes and the store:
the async proxy may read stale shared memory (023d1ffbd31d). Text order otherwise: a barrier inside
an `if` without `else` or a loop counts after it.

barriers_in_skipped_loops: a shared buffer the threads write, then read after a loop that may run zero
times, where every barrier between the write and the read lies inside that loop (TileLang 0.1.15's ThreadSync
counts the loop's own barrier as the one the write and the read need, 2c4e73a32b9e): with no trip, the read
races the write. A read at the same offset expression as the write (each thread its own elements) is fine.

unaligned_vectors: a vector load or store of N bytes (`*(uint4*)(Mask + off)`, a cp.async of N
bytes from `&(Mask[off])`) needs its address to be a multiple of N. Named buffers only (a family's
mask and bias, whose rows may start anywhere): the check computes what the offset expression is
provably a multiple of (literal factors and shifts, through sums and products; a symbolic length
proves nothing) and flags an access whose width that does not divide.

racing_shared_writes: two statements write one shared-memory address from threads of different warps with no
barrier (nor mbarrier wait, named barrier or cp.async wait) between them in the text: which value stays depends on
timing. Shown, not guessed: the offsets, vector widths and enclosing conditions are evaluated for every thread on one
instance (the first trip of the loops around both, every trip of the other loops up to 64, one length and block
index), buffers that share bytes of buf_dyn_shmem compared by address; an access the instance cannot evaluate (a
data-dependent index or guard, a warp's ldmatrix/stmatrix, a descriptor, an atomic) is not judged.

overwritten_while_read: inside a loop, threads read a shared address and, later in the same trip with nothing that
orders threads between, threads of another warp write it: a pipelined loop loading the next tile into a buffer this
stage still reads. Shown on one instance as racing_shared_writes.

overwritten_before_read: a shared tile loaded by TMA, then loaded again (the same buffer and element offset) before
any thread waited on the first load's barrier. The barrier replay of mbarrier_protocol runs the block's own code
first, then each role ahead of the others as far as its waits let it: TileLang 0.1.15's warp-specialized pipeline of a
loop that reads a tile and then loads the next one into it (the tile loaded before the loop) has its producer's first
wait on an empty slot pass at once, so the loop's first load lands on the tile loaded before the loop, unread; with
num_stages 2 or 3 every slot of the ring loads into the same buffer.

short_register_arrays: a fragment's register array (its name at the kernel's top level) with fewer elements than
the fragment's elements (the caller's `fragments`) over the block's threads as launched, rounded up. Every element
lies in some thread's registers and every thread's array has one size, so a shorter array has lost elements.

A shared buffer is a tile carved out of buf_dyn_shmem or one declared as its own `extern __shared__` /
`__shared__` array (source.shared_tiles).

Modules, by job: source (reading the CUDA), ordering, atomics, barriers, registers, alignment and races (the
checks); check() here runs them all on one kernel's source.
"""
from __future__ import annotations

from harness.codegen.alignment import unaligned_vectors
from harness.codegen.atomics import atomics_on_locals, vectorized_atomics
from harness.codegen.barriers import mbarrier_protocol, named_barrier_counts, overwritten_before_read
from harness.codegen.ordering import barriers_in_skipped_loops, reads_after_release, unsynced_tma_stores, unwaited_async_loads
from harness.codegen.races import overwritten_while_read, racing_shared_writes
from harness.codegen.registers import register_budget, registers_across_roles, short_register_arrays
from harness.codegen.source import LineFinding


def check(source: str, contiguous: dict[str, int] | None = None, aligned=(), fragments=None) -> list[LineFinding]:
    """Every check on one kernel's source; `fragments`: fragment name -> its elements."""
    return (unwaited_async_loads(source) + mbarrier_protocol(source) + vectorized_atomics(source, contiguous or {})
            + atomics_on_locals(source) + unaligned_vectors(source, aligned) + unsynced_tma_stores(source)
            + reads_after_release(source) + named_barrier_counts(source) + register_budget(source)
            + barriers_in_skipped_loops(source) + registers_across_roles(source) + racing_shared_writes(source)
            + overwritten_while_read(source) + overwritten_before_read(source) + short_register_arrays(source, fragments or {}))
