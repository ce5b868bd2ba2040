"""The generated-code checks on small CUDA excerpts shaped like TileLang's output."""
from harness import codegen

HEADER = """
  void* o_s = ((void*)((char*)buf_dyn_shmem + 0));
  void* q_s = ((void*)((char*)buf_dyn_shmem + 0));
  void* k_s = ((void*)((char*)buf_dyn_shmem + 8192));
  if (tl::tl_shuffle_elect<256>()) {
    mbarrier[8].arrive_and_expect_tx(8192);
    tl::tma_load(Q_desc, mbarrier[8], (&(((half_t*)q_s)[0])), 0, 0, 0, 0);
  }
"""

WAIT_IN_FIRST_ITERATION = HEADER + """
  for (int kb_1 = 0; kb_1 < max(0, (seq_k + 63) >> 6); ++kb_1) {
    if (kb_1 == 0) {
      mbarrier[8].wait(0);
    }
  }
"""

WAIT_BEFORE_LOOP = HEADER + """
  mbarrier[8].wait(0);
  for (int kb_1 = 0; kb_1 < max(0, (seq_k + 63) >> 6); ++kb_1) {
  }
"""

WAIT_IN_FIXED_LOOP = HEADER + """
  for (int i = 0; i < 4; ++i) {
    mbarrier[8].wait(0);
  }
"""


def test_wait_only_in_a_possibly_empty_loop_is_flagged_with_the_alias():
    [f] = codegen.check(WAIT_IN_FIRST_ITERATION)
    assert f.check == "unwaited_async_loads" and f.line == 7
    assert "mbarrier[8]" in f.message and "q_s shares shared memory with o_s" in f.message


def test_never_waited_load_is_flagged():
    [f] = codegen.check(HEADER)
    assert "never waited on" in f.message


def test_waits_reached_on_every_path_are_fine():
    assert codegen.check(WAIT_BEFORE_LOOP) == []
    assert codegen.check(WAIT_IN_FIXED_LOOP) == []


ATOMICS = """
  void* ds_s = ((void*)((char*)buf_dyn_shmem + 0));
  AtomicAddx2((&(dK[((int64_t)blockIdx.x) * (int64_t)64])), (&(dk_f[0])));
  AtomicAdd((&(dQ[((int64_t)blockIdx.x) * (int64_t)64])), dq_f[0]);
"""


def test_scalar_atomics_into_a_fragment_layout_and_row_major_pairs_are_fine():
    assert codegen.check(ATOMICS, {"dQ": 1}) == []


def test_vectorized_atomic_into_a_layout_that_splits_pairs_is_flagged():
    src = ATOMICS + "  AtomicAddx2((&(dQ[((int64_t)blockIdx.x) * (int64_t)64])), (&(dq_f[0])));\n"
    [f] = codegen.check(src, {"dQ": 1})
    assert f.check == "vectorized_atomics" and "AtomicAddx2 into dQ" in f.message
    assert codegen.check(src, {"dQ": 2}) == []


def test_vectorized_atomic_into_an_invariant_destination_is_flagged():
    # As 0.1.10 emits it for `for i in T.Parallel(n): T.atomic_add(dSinks[bx], term[i])`.
    src = "  AtomicAddx4((&(dSinks[((int)blockIdx.x)])), *(float4*)(term + 0));\n"
    [f] = codegen.check(src, {"dSinks": 1})
    assert "AtomicAddx4 into dSinks" in f.message


def test_vectorized_atomic_into_shared_memory_is_flagged():
    src = ATOMICS + "  AtomicAddx4((&(((float*)ds_s)[threadIdx.x * 4])), (&(acc[0])));\n"
    [f] = codegen.check(src)
    assert "shared-memory buffer ds_s" in f.message


def test_atomic_into_a_local_copy_is_flagged():
    # 0.1.6.post2's lowering of a bounds-checked tile-level T.atomic_add(dQ[...], dq_f).
    src = """
          float condval_4;
          if (row < seq_q_acc) {
            condval_4 = dQ[row * 64 + col];
          } else {
            condval_4 = 0x0p+0f;
          }
          AtomicAdd(condval_4, dq_f[i_8], 0);
        AtomicAdd(dK[row * 64 + col], dk_f[i_9], 0);
    """
    [f] = codegen.check(src)
    assert f.check == "atomics_on_locals" and "condval_4" in f.message


def test_each_kernel_is_checked_alone():
    """Buffers and barriers of one kernel say nothing about another's: a backward's forward kernel
    (o_s at offset 0) must not make its main kernel's q_s (also at offset 0) look aliased."""
    from harness.worker import hazards

    class Kernel:
        def __init__(self, source):
            self.source = source

        def get_kernel_source(self):
            return self.source

    class Family:
        aligned = frozenset()

        def contiguous(self, case):
            return {}

    main = WAIT_IN_FIRST_ITERATION.replace("void* o_s = ((void*)((char*)buf_dyn_shmem + 0));\n", "")
    other = "  void* o_s = ((void*)((char*)buf_dyn_shmem + 0));\n  mbarrier[8].wait(0);\n"
    [found] = hazards(Family(), None, (Kernel(other), Kernel(main)))
    assert "mbarrier[8] waited on only inside a loop" in found and "shares" not in found


# Shaped like the masked family's generated loads: an 8-byte cp.async of a uint8 mask and a 16-byte
# one of a half bias whose rows are [.., key_chunks, 8] (every term a multiple of 8 elements) ...
ALIGNED = """
extern "C" __global__ void main_kernel(const half_t* __restrict__ Bias, const uchar* __restrict__ Mask, int key_chunks, int seq_q) {
  tl::cp_async_gs_conditional<8>((&(((uchar*)mask_s)[0])), (&(Mask[(((((int64_t)kb) * (int64_t)64) + ((((int64_t)((int)blockIdx.z)) * ((int64_t)key_chunks)) * (int64_t)8)) + ((((int64_t)((int)threadIdx.x)) & (int64_t)7) * (int64_t)8))])), (kb < key_chunks));
  tl::cp_async_gs<16>((&(((half_t*)bias_s)[0])), (&(Bias[((((int64_t)i) << (int64_t)3) + (((int64_t)seq_q) * (int64_t)64))])));
  *(uint2*)(Mask + ((((int64_t)i) * ((int64_t)key_chunks)) * (int64_t)8)) = v;
}
"""  # noqa: E501
# ... and the same loads where a row starts at a multiple of seq_k elements: nothing is proved.
UNALIGNED = """
extern "C" __global__ void main_kernel(const half_t* __restrict__ Bias, const uchar* __restrict__ Mask, int seq_k) {
  tl::cp_async_gs<16>((&(((uchar*)mask_s)[0])), (&(Mask[((((int64_t)((int)blockIdx.x)) * ((int64_t)seq_k)) + (((int64_t)((int)threadIdx.x)) * (int64_t)16))])));
  uint4 b = *(uint4*)(Bias + ((((int64_t)i) * ((int64_t)seq_k)) + (int64_t)8));
  uint4 q = *(uint4*)(Q + ((int64_t)i * (int64_t)seq_k));
}
"""  # noqa: E501


def test_vector_access_at_provably_aligned_offsets_is_fine():
    assert codegen.check(ALIGNED, aligned={"Mask", "Bias"}) == []


def test_vector_access_at_an_offset_the_shape_does_not_align_is_flagged():
    found = codegen.check(UNALIGNED, aligned={"Mask", "Bias"})
    assert [(f.check, f.line) for f in found] == [("unaligned_vectors", 3), ("unaligned_vectors", 4)]
    assert "16-byte vector access to Mask" in found[0].message and "only 1 element" in found[0].message
    assert "16-byte vector access to Bias" in found[1].message  # Q is not a named buffer: not checked
    assert codegen.check(UNALIGNED) == []


def test_divisor_reads_literal_factors_shifts_and_casts():
    assert codegen.divisor("((int64_t)kb) * (int64_t)64 + x * 8") == 8
    assert codegen.divisor("(i << 4) + 32") == 16
    assert codegen.divisor("a * seq_k + 8") == 1
    assert codegen.divisor("max(a, 8) * 16 + (x & 7) * 8") == 8
    assert codegen.divisor("c ? 16 : 3") == 1 and codegen.divisor("(a * 16") == 1
