"""The code features read from CUDA excerpts shaped like TileLang 0.1.15's output."""
from harness.cuda_features import features, register_arrays

PRODUCER_CONSUMER = """
extern "C" __global__ void __launch_bounds__(256, 1) k(const half_t* __restrict__ G4, float* __restrict__ G3, int n) {
  extern __shared__ __align__(1024) uchar buf_dyn_shmem[];
  void* ring = ((void*)((char*)buf_dyn_shmem + 0));
  float F1[16];
  if (tl::tl_shuffle_elect<0>()) {
    full[0].init(1);
    empty[0].init(128);
  }
  __syncthreads();
  if (128 <= ((int)threadIdx.x)) {
    tl::warpgroup_reg_dealloc<24>();
    for (int k = 0; k < ((n + 63) >> 6); ++k) {
      empty[0].wait(((k & 1) ^ 1));
      if (tl::tl_shuffle_elect<128>()) {
        full[0].arrive_and_expect_tx(8192);
        tl::tma_load(G4_desc, full[0], (&(((half_t*)ring)[0])), 0, (k * 64));
      }
    }
  } else {
    tl::warpgroup_reg_alloc<240>();
    full[0].wait((k & 1));
    tl::ptx_ldmatrix_x4_trans((&(((half_t*)ring)[0])), (&(A[0])));
    tl::wgmma_rs<tl::DataType::kFloat16>(A, B);
    empty[0].arrive();
    tl::__sync_thread_partial(1, 128);
    AtomicAddx2((&(G3[((int)threadIdx.x) * 2])), *(float2*)(F1 + 0));
  }
}
"""

AMPERE = """
extern "C" __global__ void __launch_bounds__(128, 1) main_kernel(half_t* __restrict__ Q, float* __restrict__ dQ) {
  extern __shared__ __align__(1024) half_t S1[];
  float acc[8];
  tl::cp_async_gs_conditional<16>(S1 + ((int)threadIdx.x) * 8, Q + ((int)threadIdx.x) * 8, 0 < n);
  tl::cp_async_commit();
  tl::cp_async_wait<0>();
  __syncthreads();
  tl::mma_sync<tl::DataType::kFloat16>(acc, S1);
  AtomicMax((&(S1[((int)threadIdx.x)])), acc[0]);
  AtomicAdd((&(dQ[((int)threadIdx.x)])), acc[1]);
  tl::tma_store(dQ, (&(S1[0])), 256);
}
"""


def test_a_warp_specialized_pipeline_shows_its_roles_barriers_and_copies():
    assert features(PRODUCER_CONSUMER) == {
        "tma_load", "mbarrier:init", "mbarrier:wait", "mbarrier:arrive", "mbarrier:arrive_expect_tx", "syncthreads",
        "warp_specialized", "setmaxnreg", "elect", "ldmatrix_x4_trans", "wgmma_rs", "named_barrier:1",
        "atomic_add_x2:float:global"}


def test_an_ampere_kernel_shows_its_async_copies_atomics_by_space_and_a_plain_bulk_store():
    assert features(AMPERE) == {"cp_async:16", "cp_async_conditional", "cp_async_wait", "syncthreads", "mma",
                                "atomic_max:half_t:shared", "atomic_add:float:global", "bulk_store"}


def test_register_arrays_are_weighed_against_their_fragments_elements_per_thread():
    assert register_arrays(PRODUCER_CONSUMER) == {"F1": 16}
    assert "fragment_regs:equal" in features(PRODUCER_CONSUMER, {"F1": 16 * 256})  # 256 threads launched
    assert "fragment_regs:2x" in features(PRODUCER_CONSUMER, {"F1": 8 * 256})
    assert "fragment_regs:fewer" in features(PRODUCER_CONSUMER, {"F1": 16 * 256 + 1})
    assert not any(f.startswith("fragment_regs") for f in features(PRODUCER_CONSUMER, {"other": 4}))


def test_a_kernel_without_any_of_them_has_no_features():
    assert features("extern \"C\" __global__ void k(float* __restrict__ A) {\n  A[0] = 1.0f;\n}\n") == frozenset()
