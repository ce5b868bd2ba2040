"""What a compiled kernel is made of, read from its CUDA text: the code features a campaign's corpus keeps programs for.

`features(cuda)` names the hardware paths and synchronization the kernel uses, each a short string:

    tma_load, tma_store, tma_load_multicast, tma_store_add   tensor-map (TMA) copies through a descriptor
    bulk_load, bulk_store                                    TMA bulk copies of plain bytes (no descriptor)
    cp_async:<bytes>, cp_async_wait, cp_async_conditional    Ampere's asynchronous copies, by width
    atomic_<op>[_x2|_x4]:<dtype>:<global|shared>             atomics by vector width, destination type and space
    ldmatrix_x4[_trans], stmatrix_m8n8_x4, ...               the warp's matrix loads and stores
    wgmma_ss, wgmma_rs, mma                                  Hopper's warp-group MMA, the warp-level MMA
    mbarrier:<init|arrive|arrive_expect_tx|expect_tx|wait|cp_async_arrive>
    syncthreads, named_barrier:<id>                          block barriers, named (bar.sync id, count) ones by id
    warp_specialized, setmaxnreg, elect                      a split into producer/consumer roles on threadIdx
    fragment_regs:<fewer|equal|2x|more>                      a register array against its fragment's elements per
                                                             thread of the block, when the caller knows the
                                                             fragments (`fragments`: name -> elements)

Names only, no counts or offsets: two kernels share a feature when they use the same path, whatever their shapes.
"""
from __future__ import annotations

import re

_TMA = re.compile(r"\btl::(tma_load|tma_store|tma_load_multicast|tma_store_add)\((\w+)")
_CP_ASYNC = re.compile(r"\bcp_async_gs(_conditional)?<(\d+)>")
_ATOMIC = re.compile(r"\bAtomic(Add|Max|Min)(x2|x4)?\w*\(\(?&\(+(?:\((\w+)\*\))?(\w+)\)?\[")
_MATRIX = re.compile(r"\bptx_((?:ldmatrix|stmatrix)\w*)\(")
_WGMMA = re.compile(r"\b(wgmma_(?:ss|rs))\b")
_MMA = re.compile(r"\b(?:mma_sync|mma_m\d+n\d+k\d+\w*|gemm_(?:ss|rs|sr))\b")
_MBARRIER = re.compile(r"\]\.(init|arrive_and_expect_tx|arrive|expect_transaction|wait)\(|"
                       r"\bmbarrier_(cp_async_arrive)(?:_noinc)?\(")
_MBARRIER_NAMES = {"arrive_and_expect_tx": "arrive_expect_tx", "expect_transaction": "expect_tx"}
_NAMED = re.compile(r"__sync_thread_partial\((\d+),|\bbar\.sync (\d+)")
_PARAM = re.compile(r"(?:const )?(\w+)\* __restrict__ (\w+)")
_EXTERN_SHARED = re.compile(r"extern __shared__ __align__\(\d+\) (\w+) (\w+)\[\];")
_SHARED_VIEW = re.compile(r"void\* (\w+) = \(\(void\*\)\(\(char\*\)buf_dyn_shmem \+ \d+\)\)")
# A role split: a top-level `if` on threadIdx alone (`128 <= threadIdx.x`, `threadIdx.x < 128`).
ROLE_SPLIT = re.compile(r"^  if \(\(?(?:\d+ <= \(\(int\)threadIdx\.x\)|\(\(int\)threadIdx\.x\) < \d+)\)?\) \{$", re.M)
# A register array at the kernel's top level, where TileLang declares a fragment: `  float F3[16];`.
REGISTER_ARRAY = re.compile(r"^  (?:float|half_t|bfloat16_t|double|int|signed char|uchar|char|short|int64_t) (\w+)\[(\d+)\];$",
                            re.M)


_LAUNCH = re.compile(r"__launch_bounds__\((\d+)")


def register_arrays(cuda: str) -> dict[str, int]:
    """The kernel's top-level register arrays: name -> elements."""
    return {name: int(size) for name, size in REGISTER_ARRAY.findall(cuda)}


def per_thread(cuda: str, fragments: dict[str, int]) -> dict[str, int]:
    """Fragment name -> the elements each thread of the kernel's block must hold at least: every element lies in some
    thread's registers and every thread's array has one size (the block as launched: TileLang may add a producer
    warp group to the program's threads)."""
    m = _LAUNCH.search(cuda)
    return {name: -(-elements // int(m.group(1))) for name, elements in fragments.items()} if m else {}


def _atomics(cuda: str) -> set[str]:
    types = dict((name, t) for t, name in _PARAM.findall(cuda))
    shared = {name for _, name in _EXTERN_SHARED.findall(cuda)} | set(_SHARED_VIEW.findall(cuda))
    types.update((name, t) for t, name in _EXTERN_SHARED.findall(cuda))
    out = set()
    for op, width, cast, name in _ATOMIC.findall(cuda):
        space = "shared" if name in shared else "global"
        out.add(f"atomic_{op.lower()}{'_' + width if width else ''}:{cast or types.get(name, '?')}:{space}")
    return out


def _fragment_regs(cuda: str, fragments: dict[str, int]) -> set[str]:
    """Each fragment's register array against the elements each thread must hold of it."""
    out, wanted = set(), per_thread(cuda, fragments)
    for name, size in register_arrays(cuda).items():
        want = wanted.get(name)
        if want:
            out.add("fragment_regs:" + ("fewer" if size < want else "equal" if size == want else
                                        "2x" if size == 2 * want else "more"))
    return out


def features(cuda: str, fragments: dict[str, int] | None = None) -> frozenset[str]:
    """The code features of one kernel's CUDA text; `fragments`: fragment name -> its elements (a program's fragment
    buffers), for the fragment_regs features."""
    found = set()
    for op, first in _TMA.findall(cuda):
        found.add(op if first.endswith("_desc") else op.replace("tma", "bulk"))
    for conditional, size in _CP_ASYNC.findall(cuda):
        found.add(f"cp_async:{size}")
        if conditional:
            found.add("cp_async_conditional")
    if "cp_async_wait" in cuda:
        found.add("cp_async_wait")
    found |= _atomics(cuda)
    found |= set(_MATRIX.findall(cuda)) | set(_WGMMA.findall(cuda))
    if _MMA.search(cuda):
        found.add("mma")
    for method, cp_async in _MBARRIER.findall(cuda):
        found.add("mbarrier:" + _MBARRIER_NAMES.get(method, method or cp_async))
    if "__syncthreads()" in cuda:
        found.add("syncthreads")
    found |= {f"named_barrier:{a or b}" for a, b in _NAMED.findall(cuda)}
    if ROLE_SPLIT.search(cuda):
        found.add("warp_specialized")
    if "warpgroup_reg_alloc" in cuda or "warpgroup_reg_dealloc" in cuda:
        found.add("setmaxnreg")
    if "tl_shuffle_elect" in cuda:
        found.add("elect")
    return frozenset(found | _fragment_regs(cuda, fragments or {}))
