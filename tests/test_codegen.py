"""The generated-code checks on small CUDA excerpts shaped like TileLang's output."""
from harness import codegen, kernels
from harness.codegen import alignment, ordering, registers, source

HEADER = """
  void* o_s = ((void*)((char*)buf_dyn_shmem + 0));
  void* q_s = ((void*)((char*)buf_dyn_shmem + 0));
  void* k_s = ((void*)((char*)buf_dyn_shmem + 8192));
  if (tl::tl_shuffle_elect<0>()) {
    mbarrier[8].init(1);
  }
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
    assert f.check == "unwaited_async_loads" and f.line == 10
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


def test_a_tile_declared_as_its_own_shared_array_is_a_shared_tile():
    # 0.1.14's AtomicAddx2 into a float32 tile that TileLang declared as its own `extern __shared__` array (not carved
    # out of buf_dyn_shmem); TileLang's static `__shared__` arrays are tiles too, an mbarrier array's storage is not.
    src = """\
  extern __shared__ __align__(1024) float S3[];
  __shared__ __align__(16) uint64_t hand_mem[1];
  __shared__ __align__(16) float red_buf[64];
  AtomicAddx2((&(S3[(((int)threadIdx.x) * 2)])), *(float2*)(F1 + 0));
  AtomicAddx2((&(red_buf[(((int)threadIdx.x) * 2)])), *(float2*)(F1 + 0));
"""
    assert source.shared_tiles(src) == {"S3", "red_buf"}
    assert [(f.check, f.line) for f in codegen.check(src)] == [("vectorized_atomics", 4), ("vectorized_atomics", 5)]
    stored = """\
  extern __shared__ __align__(1024) half_t S4[];
  *(uint1*)(S4 + (((int)threadIdx.x) * 2)) = condval;
  if (tl::tl_shuffle_elect<0>()) {
    tl::fence_proxy_async();
    tl::tma_store(G7_desc, (&(S4[0])), 0, (((int)blockIdx.x) * 32));
  }
"""
    [f] = ordering.unsynced_tma_stores(stored)
    assert f.line == 5 and "TMA store of S4 after threads wrote it (line 2) with no barrier" in f.message


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


def test_atomic_into_the_address_of_a_register_arrays_element_is_flagged():
    # 0.1.15's guarded element-wise T.atomic_add of fp16 into an fp32 global at 96 threads (reproducer 31bb31694c41):
    # the global is loaded into G6_local_cast and the adds go there.
    src = """
  extern __shared__ __align__(1024) half_t S4[];
    float G6_local_cast[2];
    *(float2*)(G6_local_cast + 0) = condval_1;
    for (int vec = 0; vec < 2; ++vec) {
      AtomicAdd((&(G6_local_cast[vec])), ((float)S4_local_cast_1[vec]));
      AtomicAdd((&(G6[vec])), ((float)S4_local_cast_1[vec]));
      AtomicAdd((&(S4[vec])), ((float)S4_local_cast_1[vec]));
    }
"""
    [f] = codegen.check(src)
    assert (f.check, f.line) == ("atomics_on_locals", 6) and "G6_local_cast" in f.message


def test_each_kernel_is_checked_alone():
    """Buffers and barriers of one kernel say nothing about another's: a backward's forward kernel
    (o_s at offset 0) must not make its main kernel's q_s (also at offset 0) look aliased."""
    from harness.worker import scan

    class Kernel:
        def __init__(self, source):
            self.source = source

        def get_kernel_source(self):
            return self.source

    class Family:  # what the scan reads of a family: its judge's code-check inputs, none here
        judge = kernels.Judge(tensors=None, reference=None, canonical=None)

    main = WAIT_IN_FIRST_ITERATION.replace("void* o_s = ((void*)((char*)buf_dyn_shmem + 0));\n", "")
    other = "  void* o_s = ((void*)((char*)buf_dyn_shmem + 0));\n  mbarrier[8].init(1);\n  mbarrier[8].arrive();\n" \
            "  mbarrier[8].wait(0);\n"
    [found], code, _ = scan(Family(), None, (Kernel(other), Kernel(main)))
    assert "mbarrier[8] waited on only inside a loop" in found.message and "shares" not in found.message
    assert code == scan(Family(), None, (Kernel(other), Kernel(main)))[1] != scan(Family(), None, (Kernel(main),))[1]


# The barrier handshake of a two-slot ring, shaped like the ws family's generated kernel.
RING = """
extern "C" __global__ void __launch_bounds__(256, 1) main_kernel(int seq_k) {
  void* k_s = ((void*)((char*)buf_dyn_shmem + 0));
  if (tl::tl_shuffle_elect<0>()) {
    full[0].init(1);
    full[1].init(1);
    empty[0].init(128);
    empty[1].init(128);
  }
  __syncthreads();
  if (128 <= ((int)threadIdx.x)) {
    for (int it = 0; it < max(0, ((seq_k + 63) >> 6)); ++it) {
      empty[(it & 1)].wait(((it >> 1) & 1));
      if (tl::tl_shuffle_elect<128>()) {
        full[(it & 1)].arrive_and_expect_tx(8192);
        tl::tma_load(K_desc, full[(it & 1)], (&(((half_t*)k_s)[((it & 1) * 4096)])), 0, (it * 64), 0, 0);
      }
    }
  } else {
    #pragma unroll
    for (int s = 0; s < PRIMED; ++s) {
      empty[s].arrive();
    }
    for (int it_1 = 0; it_1 < max(0, ((seq_k + 63) >> 6)); ++it_1) {
      full[(it_1 & 1)].wait(FULL_PARITY);
      {
        tl::wgmma_ss(desc_a, desc_b);
      }
      empty[(it_1 & 1)].arrive();
    }
  }
}
"""


def ring(primed="2", full_parity="((it_1 >> 1) & 1)", edit=lambda s: s):
    return edit(RING.replace("PRIMED", primed).replace("FULL_PARITY", full_parity))


def protocol(source):
    return [f for f in codegen.check(source) if f.check == "mbarrier_protocol"]


def test_a_primed_ring_is_fine_and_its_loads_are_waited_on():
    assert codegen.check(ring()) == []


def test_a_ring_with_one_slot_primed_deadlocks_at_two_trips():
    [f] = protocol(ring(primed="1"))
    assert "deadlock at trip count 2" in f.message and "waits on empty[1] for parity 0" in f.message
    assert f.line == 13


def test_a_flipped_consumer_parity_reads_before_the_data_landed():
    [f] = protocol(ring(full_parity="(((it_1 >> 1) & 1) ^ 1)"))
    assert "wait on full[0] (parity 1) returns before any phase completed: its TMA data has not landed" in f.message


def test_a_parity_that_does_not_alternate_per_slot_is_flagged():
    [f] = protocol(ring(full_parity="0"))
    assert "waits on full[0] for parity 0 return on the same phase" in f.message


def test_a_dropped_empty_arrive_deadlocks_past_the_ring():
    [f] = protocol(ring(edit=lambda s: s.replace("      empty[(it_1 & 1)].arrive();\n", "")))
    assert "deadlock at trip count 3" in f.message


def test_an_uninitialized_barrier_is_flagged():
    [f] = protocol(ring(edit=lambda s: s.replace("    empty[1].init(128);\n", "")))
    assert "empty[1] is used but never initialized" in f.message


def test_too_many_arrivals_in_one_phase_are_flagged():
    # Every producer thread arrives on a barrier initialized for one arrival.
    [f] = protocol(ring(edit=lambda s: s.replace("if (tl::tl_shuffle_elect<128>()) {", "{")))
    assert "more arrivals in one phase than its count 1" in f.message


def test_a_ring_load_waited_only_in_a_loop_of_another_bound_is_flagged():
    src = ring(edit=lambda s: s.replace("it_1 < max(0, ((seq_k + 63) >> 6))", "it_1 < max(0, ((seq_k + 127) >> 7))"))
    [f] = [f for f in codegen.check(src) if f.check == "unwaited_async_loads"]
    assert "TMA load into k_s on full[*] waited on only inside a loop that may run zero times" in f.message


# TileLang's own warp-specialized pipeline (fwd with a window): the producer's first wait on an empty
# slot passes at once (parity 1 on a fresh barrier), and the loops start at the window's first block.
AUTO_WS = """
extern "C" __global__ void __launch_bounds__(256, 1) main_kernel(int seq_k, int seq_q) {
  if (tl::tl_shuffle_elect<0>()) {
    mbarrier[0].init(1);
    mbarrier[2].init(128);
  }
  if (((int)threadIdx.x) < 128) {
    for (int kb = max(0, ((seq_k - seq_q) >> 6) + ((int)blockIdx.x)); kb < (seq_k + 63) >> 6; ++kb) {
      mbarrier[2].wait((((kb - max(0, ((seq_k - seq_q) >> 6) + ((int)blockIdx.x))) & 1) ^ 1));
      if (tl::tl_shuffle_elect<128>()) {
        mbarrier[0].arrive_and_expect_tx(8192);
        tl::tma_load(K_desc, mbarrier[0], (&(((half_t*)k_s)[0])), 0, (kb * 64), 0, 0);
      }
    }
  } else {
    for (int kb_1 = max(0, ((seq_k - seq_q) >> 6) + ((int)blockIdx.x)); kb_1 < (seq_k + 63) >> 6; ++kb_1) {
      mbarrier[0].wait(CONSUMER_PARITY);
      mbarrier[2].arrive();
    }
  }
}
"""
AUTO_PARITY = "((kb_1 - max(0, ((seq_k - seq_q) >> 6) + ((int)blockIdx.x))) & 1)"


def test_tilelangs_own_pipeline_with_a_shifted_loop_start_is_judged_and_fine():
    assert protocol(AUTO_WS.replace("CONSUMER_PARITY", AUTO_PARITY)) == []
    [f] = protocol(AUTO_WS.replace("CONSUMER_PARITY", f"({AUTO_PARITY} ^ 1)"))
    assert "wait on mbarrier[0] (parity 1) returns before any phase completed" in f.message
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
    assert alignment.divisor("((int64_t)kb) * (int64_t)64 + x * 8") == 8
    assert alignment.divisor("(i << 4) + 32") == 16
    assert alignment.divisor("a * seq_k + 8") == 1
    assert alignment.divisor("max(a, 8) * 16 + (x & 7) * 8") == 8
    assert alignment.divisor("c ? 16 : 3") == 1 and alignment.divisor("(a * 16") == 1


# The O epilogue of the warp-specialized fwd kernel as TileLang 0.1.12 (no barrier) and 0.1.15
# (a barrier before and after the writes) generate it, trimmed (reproducer 80929a5b6a72).
_EPILOGUE = """\
  void* o_s = ((void*)((char*)buf_dyn_shmem + 0));
  {sync}
  for (int i_13 = 0; i_13 < 8; ++i_13) {{
    tl::ptx_stmatrix_m8n8_x4((&(((half_t*)o_s)[((i_13 >> 2) * 8192)])), __pack_half2(a, b), c, d, e);
  }}
  {sync}
  if (tl::tl_shuffle_elect<256>()) {{
    tl::fence_proxy_async();
    tl::tma_store(Out_desc, (&(((half_t*)o_s)[0])), 0, (((int)blockIdx.x) * 128), ((int)blockIdx.y), 0);
    tl::tma_store(Out_desc, (&(((half_t*)o_s)[8192])), 64, (((int)blockIdx.x) * 128), ((int)blockIdx.y), 0);
  }}
"""


def test_a_tma_store_of_a_buffer_the_threads_just_wrote_needs_a_barrier_between():
    found = ordering.unsynced_tma_stores(_EPILOGUE.format(sync=""))
    assert [(f.check, f.line) for f in found] == [("unsynced_tma_stores", 9)]  # one finding per buffer
    assert "o_s" in found[0].message and "line 4" in found[0].message
    assert ordering.unsynced_tma_stores(_EPILOGUE.format(sync="tl::__sync_thread_partial(3, 256);")) == []
    assert ordering.unsynced_tma_stores(_EPILOGUE.format(sync="__syncthreads();")) == []
    no_fence = _EPILOGUE.format(sync="__syncthreads();").replace("    tl::fence_proxy_async();\n", "")
    [f] = ordering.unsynced_tma_stores(no_fence)
    assert f.line == 8 and "with no fence.proxy.async in between" in f.message


# A tile the whole block writes before a warp-group split, TMA-stored by the else side (reproducer bac98dcbc2c6):
# the then side's partial barrier orders its own 128 threads only.
_SPLIT = """\
  void* S1 = ((void*)((char*)buf_dyn_shmem + 0));
  ((half_t*)S1)[((int)threadIdx.x)] = condval;
  {sync}
  if (((int)threadIdx.x) < 128) {{
    *(uint4*)(((half_t*)scan_smem) + (((int)threadIdx.x) * 8)) = *(uint4*)(src_buffer + 0);
    tl::__sync_thread_partial(3, 128);
    hand[0].arrive();
  }} else {{
    {wait}
    if (tl::tl_shuffle_elect<256>()) {{
      {fence}
      tl::tma_store(G9_desc, (&(((half_t*)S1)[0])), 0, (((int)blockIdx.x) * 128));
    }}
  }}
"""


def test_a_barrier_in_the_other_branch_does_not_order_a_tma_store():
    [f] = ordering.unsynced_tma_stores(_SPLIT.format(sync="", wait="", fence="tl::fence_proxy_async();"))
    assert f.line == 12 and "line 2) with no barrier in between" in f.message
    assert ordering.unsynced_tma_stores(_SPLIT.format(sync="__syncthreads();", wait="", fence="tl::fence_proxy_async();")) == []


def test_a_tile_handed_over_by_an_mbarrier_needs_a_proxy_fence_before_its_tma_store():
    # Reproducer 023d1ffbd31d: one side writes the tile and arrives, the other waits and stores it, with no fence.
    src = """\
  void* S5 = ((void*)((char*)buf_dyn_shmem + 2048));
  if (((int)threadIdx.x) < 128) {
    *(float4*)(((float*)S5) + (((int)threadIdx.x) * 4)) = *(float4*)(S5_local_cast + 0);
    hand[0].arrive();
  } else {
    hand[0].wait(0);
    if (tl::tl_shuffle_elect<128>()) {
      tl::tma_store(G7_desc, (&(((float*)S5)[0])), 0, (((int)blockIdx.x) * 32));
    }
  }
"""
    [f] = ordering.unsynced_tma_stores(src)
    assert f.line == 8 and "(line 3) with neither a barrier nor a fence.proxy.async" in f.message


RING_WITH_MASK = """
  void* k_s = ((void*)((char*)buf_dyn_shmem + 0));
  void* mask_s = ((void*)((char*)buf_dyn_shmem + 16384));
  if (((int)threadIdx.x) < 128) {
    for (int kb = 0; kb < ((seq_k + 63) >> 6); ++kb) {
      mbarrier[((producer_phase_cnt[0] & 1) + 4)].wait((((producer_phase_cnt[0] & 3) >> 1) ^ 1));
      tl::cp_async_gs_conditional<16>((&(((uchar*)mask_s)[((producer_phase_cnt[0] & 1) * 4096)])), (&(Mask[kb])), true);
      tl::tma_load(K_desc, mbarrier[(producer_phase_cnt[0] & 1)], (&(((half_t*)k_s)[(producer_phase_cnt[0] & 1)])), 0, kb);
    }
  } else {
    for (int kb_1 = 0; kb_1 < ((seq_k + 63) >> 6); ++kb_1) {
      mbarrier[(consumer_phase_cnt[0] & 1)].wait(((consumer_phase_cnt[0] & 3) >> 1));
      tl::gemm_ss<64>((&(((half_t*)q_s)[0])), (&(((half_t*)k_s)[((consumer_phase_cnt[0] & 1) * 4096)])), (&(acc_s[0])));
EARLY
      acc_s[0] = ((0 < ((int)((uchar*)mask_s)[((consumer_phase_cnt[0] & 1) * 4096)])) ? acc_s[0] : -CUDART_INF_F);
LATE
    }
  }
"""
RELEASE = "      mbarrier[((consumer_phase_cnt[0] & 1) + 4)].arrive();"


def test_a_stage_read_after_its_release_is_flagged():
    """TileLang 0.1.15 pipelining the masked forward's key loop (T.Pipelined, 2 stages): the
    consumer releases K's stage right after QK^T, then reads that stage's mask_s, which the
    producer refills after waiting on the same release."""
    early = RING_WITH_MASK.replace("EARLY", RELEASE).replace("LATE\n", "")
    [found] = ordering.reads_after_release(early)
    assert found.line == early.splitlines().index(
        "      acc_s[0] = ((0 < ((int)((uchar*)mask_s)[((consumer_phase_cnt[0] & 1) * 4096)])) ? acc_s[0] : -CUDART_INF_F);") + 1
    assert "mask_s read after this iteration released its stage" in found.message
    late = RING_WITH_MASK.replace("EARLY\n", "").replace("LATE", RELEASE)
    assert ordering.reads_after_release(late) == []
    # A consumer priming the ring (an arrive before its loop) releases nothing it has read; and the
    # consumer's own writes after the producer's loop are not that stage's contents.
    primed = late.replace("  } else {\n", "  } else {\n" + RELEASE + "\n    ((half_t*)q_s)[0] = Q[0];\n")
    assert ordering.reads_after_release(primed) == []


# A warp-specialized epilogue: 256 consumer threads (threadIdx >= 128) sync before and after writing o_s.
EPILOGUE = """
extern "C" __global__ void __launch_bounds__(384, 1) main_kernel(int seq_k) {
  if (((int)threadIdx.x) < 128) {
    tl::__sync_thread_partial(2, 128);
  } else {
    for (int kb = 0; kb < seq_k; ++kb) {
      if (kb == 0) {
        tl::__sync_thread_partial(4, COUNT);
      }
    }
    tl::__sync_thread_partial(3, COUNT);
    if (((int)threadIdx.x) < 256) {
      tl::__sync_thread_partial(5, 128);
    }
    tl::__sync_thread_partial(3, COUNT);
  }
}
"""


def named(source):
    return [f for f in codegen.check(source) if f.check == "named_barrier_counts"]


def test_named_barriers_counting_their_roles_threads_are_fine():
    assert named(EPILOGUE.replace("COUNT", "256")) == []


def test_a_named_barrier_counting_fewer_threads_than_run_it_is_a_deadlock():
    """TileLang 0.1.12 emitted the consumers' epilogue barrier as (3, 192) for 256 threads in some
    compiles: the block hung on the GPU (reproducer bb5de5939ba0)."""
    found = named(EPILOGUE.replace("COUNT", "192"))
    assert [f.line for f in found] == [8, 11, 15]  # in a loop and under a uniform test too
    assert "bar.sync 3 counts 192 threads but threads >= 128 (256 threads) run it" in found[1].message


REGISTERS = """
extern "C" __global__ void __launch_bounds__(512, 1) main_kernel(int seq_k) {
  __syncthreads();
  if (384 <= ((int)threadIdx.x)) {
    tl::warpgroup_reg_dealloc<24>();
    for (int kb = 0; kb < ((seq_k + 63) >> 6); ++kb) {
    }
  } else {
    tl::warpgroup_reg_alloc<CONSUMER>();
    for (int kb_1 = 0; kb_1 < ((seq_k + 63) >> 6); ++kb_1) {
    }
  }
}
"""


def budget(source):
    return [f for f in codegen.check(source) if f.check == "register_budget"]


def test_setmaxnreg_within_the_register_file_is_fine():
    """0.1.15's fwd at 192x64 with 384 consumer threads: 384 x 160 + 128 x 24 = 64512 registers."""
    assert budget(REGISTERS.replace("CONSUMER", "160")) == []
    assert budget(REGISTERS.replace("CONSUMER", "160").replace("__launch_bounds__(512, 1) ", "")) == []


def test_setmaxnreg_beyond_the_register_file_is_a_deadlock():
    """0.1.10 asked 240 for the same 384 consumer threads: 95232 registers; the block hung on the
    H100 on every length and every compile."""
    found = budget(REGISTERS.replace("CONSUMER", "240"))
    assert [f.line for f in found] == [9]
    assert "128 x 24 (threads >= 384) + 384 x 240 (threads < 384) = 95232 registers" in found[0].message


# 2c4e73a32b9e's shape: S written by the threads before a loop whose only barriers guard its own tile W, read after it.
BIAS_AFTER_LOOP = """
  void* S = ((void*)((char*)buf_dyn_shmem + 0));
  void* W = ((void*)((char*)buf_dyn_shmem + 16384));
  for (int i_1 = 0; i_1 < 8; ++i_1) {
    *(uint2*)(((half_t*)S) + ((i_1 * 1024) + (((int)threadIdx.x) * 4))) = *(uint2*)(S_local + 0);
  }
{BEFORE}  for (int k = 0; k < {BOUND}; ++k) {
    __syncthreads();
    ((half_t*)W)[((int)threadIdx.x)] = X[k];
    __syncthreads();
    tl::gemm_rs<64>((&(((half_t*)W)[0])), (&(acc[0])));
  }
  for (int i_5 = 0; i_5 < 16; ++i_5) {
    *(uint1*)(S_local_5 + 0) = *(uint1*)(((half_t*)S) + {READ});
  }
"""
OTHER_THREADS = "((((int)threadIdx.x) >> 5) * 1024) + (i_5 * 8))"
OWN = "((i_1 * 1024) + (((int)threadIdx.x) * 4)))"


def _bias(bound="(n >> 7)", before="", read=OTHER_THREADS):
    return BIAS_AFTER_LOOP.replace("{BOUND}", bound).replace("{BEFORE}", before).replace("{READ}", read)


def test_a_barrier_only_inside_a_loop_that_may_not_run_does_not_order_a_write_before_it_and_a_read_after_it():
    found = ordering.barriers_in_skipped_loops(_bias())
    assert [(f.check, f.line) for f in found] == [("barriers_in_skipped_loops", 14)]
    assert "S written by the threads at line 5" in found[0].message and "(n >> 7)" in found[0].message
    assert ordering.barriers_in_skipped_loops(_bias(bound="4")) == []  # the loop surely runs: its barrier is reached
    assert ordering.barriers_in_skipped_loops(_bias(before="  __syncthreads();\n")) == []  # a barrier outside it
    assert ordering.barriers_in_skipped_loops(_bias(read=OWN)) == []  # each thread reads what it wrote
    assert [f.check for f in codegen.check(_bias())] == ["barriers_in_skipped_loops"]


# TileLang 0.1.15's CUDA for run 14's G11 program (4375131b1e26, be71d6527dc3's bug): the producer's loop is over k,
# the consumer's over k_1, so the two name one barrier slot with different loop variables.
RING_BY_LOOP_VARIABLE = """
  void* S5 = ((void*)((char*)buf_dyn_shmem + 4096));
  void* S7 = ((void*)((char*)buf_dyn_shmem + 16384));
  if (((int)threadIdx.x) < 128) {
    for (int k = 0; k < ((n + 63) >> 6); ++k) {
      mbarrier[((k % 3) + 3)].wait((((k % 6) / 3) ^ 1));
      for (int i_1 = 0; i_1 < 16; ++i_1) {
        ((half_t*)S7)[(((k % 3) * 2048) + (i_1 * 128))] = condval_1;
      }
      tl::tma_load(G5_desc, mbarrier[(k % 3)], (&(((half_t*)S5)[((k % 3) * 2048)])), 0, (k * 64));
    }
  } else {
    for (int k_1 = 0; k_1 < ((n + 63) >> 6); ++k_1) {
      mbarrier[(k_1 % 3)].wait(((k_1 % 6) / 3));
      tl::initialize_wgmma_descriptor<2, 1, 32>(desc_b, (&(((half_t*)S5)[0])));
RELEASE_HERE
      tl::initialize_wgmma_descriptor<2, 0, 32>(desc_b_1, (&(((half_t*)S7)[0])));
RELEASE_LAST
    }
  }
"""


def test_a_release_is_matched_to_its_wait_whatever_each_loop_calls_its_variable():
    release = "      mbarrier[((k_1 % 3) + 3)].arrive();"
    early = RING_BY_LOOP_VARIABLE.replace("RELEASE_HERE", release).replace("RELEASE_LAST\n", "")
    [found] = ordering.reads_after_release(early)
    assert "S7 read after this iteration released its stage (mbarrier[((k%3)+3)].arrive()" in found.message
    late = RING_BY_LOOP_VARIABLE.replace("RELEASE_HERE\n", "").replace("RELEASE_LAST", release)
    assert ordering.reads_after_release(late) == []


# 12eba470b947's kernel (0.1.15, trimmed): A loaded and row-summed by all 256 threads, then the warp-specialized split.
ACROSS_ROLES = """
extern "C" __global__ void __launch_bounds__(256, 1) program_kernel(const bfloat16_t* __restrict__ X, float* __restrict__ Y) {
  float A[8];
  float s[1];
  float B[8];
  {
    bfloat16_t X_local_cast[8];
    *(uint4*)(X_local_cast + 0) = *(uint4*)(X + (((int)threadIdx.x) * 8));
    for (int i = 0; i < 2; ++i) {
      float4 __1;
      uint2 v_ = *(uint2*)(X_local_cast + (i * 4));
      ((float2*)(&__1))[0] = __bfloat1622float2((reinterpret_cast<__nv_bfloat162*>(&v_))[0]);
      *(float4*)(A + (i * 4)) = __1;
    }
  }
  s[0] = 0x0p+0f/*0.000000e+00*/;
  for (int rv = 0; rv < 8; ++rv) {
    s[0] = (s[0] + A[rv]);
  }
  if (((int)threadIdx.x) < 128) {
    tl::warpgroup_reg_dealloc<24>();
  } else {
    float4 v__1 = *(float4*)(A + 0);
    *(float4*)(B + 0) = make_float4(s[0], s[0], s[0], s[0]);
    *(float4*)(Y + ((((int)threadIdx.x) * 8) - 1024)) = *(float4*)(B + 0);
  }
  AFTER
}
"""


def test_registers_loaded_by_every_thread_and_read_inside_one_role_are_flagged():
    source = ACROSS_ROLES.replace("AFTER", "")
    line = [text.strip() for text in source.splitlines()].index
    found = registers.registers_across_roles(source)
    assert [(f.line, f.message.split(" holds")[0]) for f in found] == [
        (line("float4 v__1 = *(float4*)(A + 0);") + 1, "A"),
        (line("*(float4*)(B + 0) = make_float4(s[0], s[0], s[0], s[0]);") + 1, "s")]
    assert f"split (line {line('if (((int)threadIdx.x) < 128) {') + 1}: `if (((int)threadIdx.x) < 128) {{`)" in found[0].message
    # The same values read after the split, by every thread again, are theirs; so is a constant fill before it.
    assert registers.registers_across_roles(ACROSS_ROLES.replace("A + 0", "Y + 0").replace("s[0], s[0]", "1.0f, 1.0f")
                                          .replace("AFTER", "Y[0] = A[0] + s[0];")) == []
    filled = ACROSS_ROLES.replace("*(uint4*)(X + (((int)threadIdx.x) * 8))", "make_uint4(0, 0, 0, 0)").replace("AFTER", "")
    assert registers.registers_across_roles(filled) == []
    assert registers.registers_across_roles(ACROSS_ROLES.replace("  if (((int)threadIdx.x) < 128) {", "  if (n < 128) {")
                                          .replace("AFTER", "")) == []


# Shared-memory races shown on one instance: a fill by one thread layout, then a copy in by another.
FILL_THEN_COPY = """
extern "C" __global__ void __launch_bounds__(128, 1) program_kernel(const half_t* __restrict__ G2, int n) {
  extern __shared__ __align__(1024) half_t S1[];
  #pragma unroll
  for (int i = 0; i < 8; ++i) {
    S1[((i * 128) + ((int)threadIdx.x))] = half_t(0x0p+0f/*0.000000e+00*/);
  }
  BARRIER
  *(uint4*)(S1 + (((int)threadIdx.x) * 8)) = *(uint4*)(G2 + (((int)threadIdx.x) * 8));
}
"""


def test_two_writes_of_one_shared_address_by_two_warps_with_no_barrier_between_race():
    [f] = codegen.check(FILL_THEN_COPY.replace("BARRIER", ""))
    assert f.check == "racing_shared_writes" and f.line == 9 and "S1 written here and S1 at line 6" in f.message


def test_writes_ordered_by_a_barrier_or_each_threads_own_do_not_race():
    assert codegen.check(FILL_THEN_COPY.replace("BARRIER", "__syncthreads();")) == []
    own = FILL_THEN_COPY.replace("BARRIER", "").replace("(i * 128) + ((int)threadIdx.x)", "(((int)threadIdx.x) * 8) + i")
    assert codegen.check(own) == []


# A pipelined loop's stage read from shared memory (another thread's element), then the next tile written over it.
READ_THEN_REFILL = """
extern "C" __global__ void __launch_bounds__(128, 1) k(const half_t* __restrict__ G2, float* __restrict__ G3, int n) {
  extern __shared__ __align__(1024) uchar buf_dyn_shmem[];
  void* S1 = ((void*)((char*)buf_dyn_shmem + 0));
  void* S4 = ((void*)((char*)buf_dyn_shmem + 256));
  float F2[1];
  for (int k = 0; k < ((n + 127) >> 7); ++k) {
    F2[0] = ((float)((half_t*)S1)[(127 - ((int)threadIdx.x))]);
    BARRIER
    ((half_t*)S1)[((int)threadIdx.x)] = G2[((k * 128) + ((int)threadIdx.x))];
    ((half_t*)S4)[((int)threadIdx.x)] = G2[((k * 128) + ((int)threadIdx.x))];
    G3[((k * 128) + ((int)threadIdx.x))] = F2[0];
  }
}
"""


def test_a_tile_overwritten_in_the_trip_that_another_warp_reads_it_is_flagged():
    [f] = codegen.check(READ_THEN_REFILL.replace("BARRIER", ""))
    assert f.check == "overwritten_while_read" and f.line == 10
    assert "loop over k (line 7)" in f.message and "S1, line 8" in f.message


def test_a_refill_after_a_barrier_or_into_the_readers_own_element_or_another_buffer_is_fine():
    assert codegen.check(READ_THEN_REFILL.replace("BARRIER", "__syncthreads();")) == []
    own = READ_THEN_REFILL.replace("BARRIER", "").replace("(127 - ((int)threadIdx.x))", "((int)threadIdx.x)")
    assert codegen.check(own) == []


def test_a_read_the_instance_cannot_evaluate_is_not_judged():
    data = READ_THEN_REFILL.replace("BARRIER", "").replace("(127 - ((int)threadIdx.x))", "((int)F2[0])")
    assert codegen.check(data) == []


def test_a_register_array_shorter_than_its_fragments_elements_per_thread_of_the_block_is_flagged():
    src = "__global__ void __launch_bounds__(256, 1) k() {\n  float F3[8];\n  float F4[2];\n}\n"
    [f] = codegen.check(src, fragments={"F3": 16 * 256, "F4": 128})
    assert f.check == "short_register_arrays" and "F3[8]" in f.message and "16 elements" in f.message
    # TileLang's producer warp group doubles a 128-thread program's block: 8 of its 2048 elements each is right.
    assert codegen.check(src, fragments={"F3": 2048, "F4": 512}) == []


# 0.1.15's warp-specialized T.Pipelined(3, num_stages=1) loop that reads S, then loads the next tile into it (S loaded
# before the loop): the producer's first wait on the empty slot passes at once, so its first load lands on the tile
# the code before the loop loaded, before any consumer waited for that one.
PRELOADED = """
extern "C" __global__ void __launch_bounds__(256, 1) k(__grid_constant__ const CUtensorMap A_desc, int n) {
  __shared__ __align__(16) uint64_t mbarrier_mem[3];
  auto mbarrier = reinterpret_cast<Barrier*>(mbarrier_mem);
  extern __shared__ __align__(1024) half_t S[];
  half_t R[16];
  if (tl::tl_shuffle_elect<0>()) {
    mbarrier[0].init(1);
    mbarrier[1].init(128);
    mbarrier[2].init(1);
  }
  tl::fence_barrier_init();
  __syncthreads();
  if (tl::tl_shuffle_elect<256>()) {
    mbarrier[2].arrive_and_expect_tx(4096);
    tl::tma_load(A_desc, mbarrier[2], (&(S[0])), 0, (((int)blockIdx.x) * 32));
  }
  __syncthreads();
  if (((int)threadIdx.x) < 128) {
    for (int k = 0; k < 3; ++k) {
      mbarrier[1].wait(((k & 1) ^ 1));
      if (tl::tl_shuffle_elect<128>()) {
        mbarrier[0].arrive_and_expect_tx(4096);
        tl::tma_load(A_desc, mbarrier[0], (&(S[0])), 0, (k * 32));
      }
    }
  } else {
    for (int k_1 = 0; k_1 < 3; ++k_1) {
      if (k_1 == 0) {
        mbarrier[2].wait(0);
      }
      mbarrier[0].wait((k_1 & 1));
      #pragma unroll
      for (int i = 0; i < 2; ++i) {
        *(uint4*)(R + (i * 8)) = *(uint4*)(S + (((i * 1024) + (((int)threadIdx.x) * 8)) - 1024));
      }
      mbarrier[1].arrive();
    }
  }
}
"""


def test_a_tile_loaded_again_before_anyone_waited_for_its_first_load_is_flagged():
    found = [f for f in codegen.check(PRELOADED) if f.check == "overwritten_before_read"]
    assert [f.line for f in found] == [24] and "load at line 16 into it (on mbarrier[2])" in found[0].message


def test_a_refill_after_the_readers_release_or_into_another_slot_is_fine():
    # The producer's first wait needs the consumers' release, which follows their wait for the first load.
    released = PRELOADED.replace("mbarrier[1].wait(((k & 1) ^ 1));", "mbarrier[1].wait((k & 1));") \
        .replace("      mbarrier[0].wait((k_1 & 1));", "      mbarrier[1].arrive();\n      mbarrier[0].wait((k_1 & 1));")
    assert not [f for f in codegen.check(released) if f.check == "overwritten_before_read"]
    other_slot = PRELOADED.replace("mbarrier[0], (&(S[0]))", "mbarrier[0], (&(S[(((k & 1) + 1) * 2048)]))")
    assert not [f for f in codegen.check(other_slot) if f.check == "overwritten_before_read"]
