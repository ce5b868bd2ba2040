#if defined(_MSC_VER) && !defined(__clang__) && _MSC_VER < 1940
#define _tl_orig_alignas alignas
#define alignas(N) _tl_orig_alignas((N) <= 64 ? (N) : 64)
#include <cuda.h>
#undef alignas
#define alignas _tl_orig_alignas
#endif
#include <tl_templates/cuda/instruction/wgmma.h>
#include <tl_templates/cuda/intrin.h>
#include <tl_templates/cuda/barrier.h>
#include <tl_templates/cuda/copy_sm90.h>
#include <math_constants.h>
#include <tl_templates/cuda/reduce.h>
#include <tl_templates/cuda/scan.h>
#include <tl_templates/cuda/ldsm.h>
#include <tl_templates/cuda/threadblock_swizzle.h>
#include <tl_templates/cuda/debug.h>
#ifdef ENABLE_BF16
#include <tl_templates/cuda/cuda_bf16_fallbacks.cuh>
#endif

extern "C" __global__ void main_kernel(__grid_constant__ const CUtensorMap K_desc, float* __restrict__ Lse, __grid_constant__ const CUtensorMap Out_desc, __grid_constant__ const CUtensorMap Q_desc, const float* __restrict__ Sinks, __grid_constant__ const CUtensorMap V_desc, int batch, int seq_k, int seq_q);
extern "C" __global__ void __launch_bounds__(384, 1) main_kernel(__grid_constant__ const CUtensorMap K_desc, float* __restrict__ Lse, __grid_constant__ const CUtensorMap Out_desc, __grid_constant__ const CUtensorMap Q_desc, const float* __restrict__ Sinks, __grid_constant__ const CUtensorMap V_desc, int batch, int seq_k, int seq_q) {
  extern __shared__ __align__(1024) uchar buf_dyn_shmem[];
  void* o_s = ((void*)((char*)buf_dyn_shmem + 0));
  void* q_s = ((void*)((char*)buf_dyn_shmem + 0));
  void* k_s = ((void*)((char*)buf_dyn_shmem + 32768));
  void* v_s = ((void*)((char*)buf_dyn_shmem + 65536));
  __shared__ __align__(16) uint64_t mbarrier_mem[9];
  auto mbarrier = reinterpret_cast<Barrier*>(mbarrier_mem);
  float acc_o[64];
  float denom[2];
  float row_max[2];
  float lse_f[2];
  float acc_s[32];
  float row_max_prev[2];
  float row_max_clear[2];
  float row_scale[2];
  float row_sum[2];
  half_t p_cast[32];
  if (tl::tl_shuffle_elect<0>()) {
    tl::prefetch_tma_descriptor(Q_desc);
    tl::prefetch_tma_descriptor(K_desc);
    tl::prefetch_tma_descriptor(V_desc);
    tl::prefetch_tma_descriptor(Out_desc);
  }
  if (tl::tl_shuffle_elect<0>()) {
    mbarrier[0].init(1);
    mbarrier[1].init(1);
    mbarrier[2].init(1);
    mbarrier[3].init(1);
    mbarrier[4].init(256);
    mbarrier[5].init(256);
    mbarrier[6].init(256);
    mbarrier[7].init(256);
    mbarrier[8].init(1);
  }
  tl::fence_barrier_init();
  __syncthreads();
  if (tl::tl_shuffle_elect<384>()) {
    mbarrier[8].arrive_and_expect_tx(32768);
    tl::tma_load(Q_desc, mbarrier[8], (&(((half_t*)q_s)[0])), 0, (((int)blockIdx.x) * 128), ((int)blockIdx.y), ((int)blockIdx.z));
    tl::tma_load(Q_desc, mbarrier[8], (&(((half_t*)q_s)[8192])), 64, (((int)blockIdx.x) * 128), ((int)blockIdx.y), ((int)blockIdx.z));
  }
  __syncthreads();
  if (((int)threadIdx.x) < 128) {
    tl::warpgroup_reg_dealloc<24>();
    for (int kb = max(0, ((((int)blockIdx.x) * 2) + ((seq_k - seq_q) >> 6))); kb < max(max(((((int)blockIdx.x) * 2) + ((seq_k - seq_q) >> 6)), (min((seq_k + 63), ((((((int)blockIdx.x) * 128) + seq_k) + 191) - seq_q)) >> 6)), 0); ++kb) {
      mbarrier[(((kb - max(0, ((((int)blockIdx.x) * 2) + ((seq_k - seq_q) >> 6)))) & 1) + 4)].wait(((((kb - max(0, ((((int)blockIdx.x) * 2) + ((seq_k - seq_q) >> 6)))) & 3) >> 1) ^ 1));
      if (tl::tl_shuffle_elect<128>()) {
        mbarrier[((kb - max(0, ((((int)blockIdx.x) * 2) + ((seq_k - seq_q) >> 6)))) & 1)].arrive_and_expect_tx(16384);
        tl::tma_load(K_desc, mbarrier[((kb - max(0, ((((int)blockIdx.x) * 2) + ((seq_k - seq_q) >> 6)))) & 1)], (&(((half_t*)k_s)[((kb & 1) * 8192)])), 0, (kb * 64), 0, ((int)blockIdx.z));
        tl::tma_load(K_desc, mbarrier[((kb - max(0, ((((int)blockIdx.x) * 2) + ((seq_k - seq_q) >> 6)))) & 1)], (&(((half_t*)k_s)[(((kb & 1) * 8192) + 4096)])), 64, (kb * 64), 0, ((int)blockIdx.z));
      }
      mbarrier[(((kb - max(0, ((((int)blockIdx.x) * 2) + ((seq_k - seq_q) >> 6)))) & 1) + 6)].wait(((((kb - max(0, ((((int)blockIdx.x) * 2) + ((seq_k - seq_q) >> 6)))) & 3) >> 1) ^ 1));
      if (tl::tl_shuffle_elect<128>()) {
        mbarrier[(((kb - max(0, ((((int)blockIdx.x) * 2) + ((seq_k - seq_q) >> 6)))) & 1) + 2)].arrive_and_expect_tx(16384);
        tl::tma_load(V_desc, mbarrier[(((kb - max(0, ((((int)blockIdx.x) * 2) + ((seq_k - seq_q) >> 6)))) & 1) + 2)], (&(((half_t*)v_s)[((kb & 1) * 8192)])), 0, (kb * 64), 0, ((int)blockIdx.z));
        tl::tma_load(V_desc, mbarrier[(((kb - max(0, ((((int)blockIdx.x) * 2) + ((seq_k - seq_q) >> 6)))) & 1) + 2)], (&(((half_t*)v_s)[(((kb & 1) * 8192) + 4096)])), 64, (kb * 64), 0, ((int)blockIdx.z));
      }
    }
  } else {
    tl::warpgroup_reg_alloc<240>();
    #pragma unroll
    for (int i = 0; i < 16; ++i) {
      float broadcast_var = 0x0p+0f/*0.000000e+00*/;
      *(float4*)(acc_o + (i * 4)) = make_float4(broadcast_var, broadcast_var, broadcast_var, broadcast_var);
    }
    float broadcast_var_1 = 0x0p+0f/*0.000000e+00*/;
    *(float2*)(denom + 0) = make_float2(broadcast_var_1, broadcast_var_1);
    float broadcast_var_2 = -CUDART_INF_F;
    *(float2*)(row_max + 0) = make_float2(broadcast_var_2, broadcast_var_2);
    for (int kb_1 = max(0, ((((int)blockIdx.x) * 2) + ((seq_k - seq_q) >> 6))); kb_1 < max(max(((((int)blockIdx.x) * 2) + ((seq_k - seq_q) >> 6)), (min((seq_k + 63), ((((((int)blockIdx.x) * 128) + seq_k) + 191) - seq_q)) >> 6)), 0); ++kb_1) {
      #pragma unroll
      for (int i_1 = 0; i_1 < 8; ++i_1) {
        float broadcast_var_3 = 0x0p+0f/*0.000000e+00*/;
        *(float4*)(acc_s + (i_1 * 4)) = make_float4(broadcast_var_3, broadcast_var_3, broadcast_var_3, broadcast_var_3);
      }
      if (kb_1 == max(0, ((((int)blockIdx.x) * 2) + ((seq_k - seq_q) >> 6)))) {
        mbarrier[8].wait(0);
      }
      mbarrier[((kb_1 - max(0, ((((int)blockIdx.x) * 2) + ((seq_k - seq_q) >> 6)))) & 1)].wait((((kb_1 - max(0, ((((int)blockIdx.x) * 2) + ((seq_k - seq_q) >> 6)))) & 3) >> 1));
      {
        tl::GmmaDescriptor desc_a;
        tl::GmmaDescriptor desc_b;
        tl::initialize_wgmma_descriptor<1, 1, 64>(desc_a, (&(((half_t*)q_s)[0])));
        tl::initialize_wgmma_descriptor<1, 1, 64>(desc_b, (&(((half_t*)k_s)[0])));
        tl::increase_descriptor_offset<int>(desc_b, ((kb_1 & 1) * 16384));
        tl::warpgroup_fence_operand(reinterpret_cast<float*>(acc_s + 0), 64);
        tl::warpgroup_arrive();
        #pragma unroll
        for (int ki = 0; ki < 8; ++ki) {
          tl::wgmma_ss<tl::DataType::kFloat16, tl::DataType::kFloat16, tl::DataType::kFloat32, 64, 64, 16, false, false, 1, 1>(uint64_t(desc_a + (((((ki >> 2) * 16384) + ((((((int)threadIdx.x) >> 7) + 1) & 1) * 8192)) + ((ki & 3) * 32)) >> 4)), uint64_t(desc_b + ((((ki >> 2) * 8192) + ((ki & 3) * 32)) >> 4)), ((uint32_t*)(acc_s + 0)), 1);
        }
        tl::warpgroup_commit_batch();
        tl::warpgroup_wait<0>();
        tl::warpgroup_fence_operand(reinterpret_cast<float*>(acc_s + 0), 64);
      }
      mbarrier[(((kb_1 - max(0, ((((int)blockIdx.x) * 2) + ((seq_k - seq_q) >> 6)))) & 1) + 4)].arrive();
      #pragma unroll
      for (int i_2 = 0; i_2 < 32; ++i_2) {
        float condval;
        if (((((((((kb_1 * 64) + ((i_2 >> 2) * 8)) + ((((int)threadIdx.x) & 3) * 2)) + (i_2 & 1)) + 64) <= ((((((((int)blockIdx.x) * 128) + ((((int)threadIdx.x) >> 5) * 16)) + (((i_2 & 3) >> 1) * 8)) + ((((int)threadIdx.x) & 31) >> 2)) + seq_k) - seq_q)) && ((((((((((int)blockIdx.x) * 128) + ((((int)threadIdx.x) >> 5) * 16)) + (((i_2 & 3) >> 1) * 8)) + ((((int)threadIdx.x) & 31) >> 2)) + seq_k) - seq_q) - 64) == ((((kb_1 * 64) + ((i_2 >> 2) * 8)) + ((((int)threadIdx.x) & 3) * 2)) + (i_2 & 1)))) && (((((kb_1 * 64) + ((i_2 >> 2) * 8)) + ((((int)threadIdx.x) & 3) * 2)) + (i_2 & 1)) < seq_k))) {
          condval = acc_s[i_2];
        } else {
          condval = -CUDART_INF_F;
        }
        acc_s[i_2] = condval;
      }
      *(float2*)(row_max_prev + 0) = *(float2*)(row_max + 0);
      #pragma unroll
      for (int i_3 = 0; i_3 < 2; ++i_3) {
        row_max_clear[i_3] = -CUDART_INF_F;
        #pragma unroll
        for (int rv = 0; rv < 16; ++rv) {
          row_max_clear[i_3] = max(row_max_clear[i_3], acc_s[((((rv & 7) * 4) + (i_3 * 2)) + (rv >> 3))]);
        }
        row_max_clear[i_3] = tl::AllReduce<tl::MaxOp, 4, 1, 128, tl::NamedBarrier<256>>::run(row_max_clear[i_3]);
        row_max[i_3] = max(row_max[i_3], row_max_clear[i_3]);
      }
      #pragma unroll
      for (int i_4 = 0; i_4 < 2; ++i_4) {
        float condval_1;
        if ((row_max_prev[i_4] == -CUDART_INF_F)) {
          condval_1 = 0x0p+0f/*0.000000e+00*/;
        } else {
          condval_1 = exp2f(((row_max_prev[i_4] - row_max[i_4]) * 0x1.0527dbd87e24dp-3f/*1.275174e-01*/));
        }
        row_scale[i_4] = condval_1;
      }
      #pragma unroll
      for (int i_5 = 0; i_5 < 32; ++i_5) {
        float condval_2;
        if ((row_max[((i_5 & 3) >> 1)] == -CUDART_INF_F)) {
          condval_2 = 0x0p+0f/*0.000000e+00*/;
        } else {
          condval_2 = exp2f(((acc_s[i_5] - row_max[((i_5 & 3) >> 1)]) * 0x1.0527dbd87e24dp-3f/*1.275174e-01*/));
        }
        acc_s[i_5] = condval_2;
      }
      #pragma unroll
      for (int i_6 = 0; i_6 < 2; ++i_6) {
        row_sum[i_6] = 0x0p+0f/*0.000000e+00*/;
        #pragma unroll
        for (int rv_1 = 0; rv_1 < 16; ++rv_1) {
          row_sum[i_6] = (row_sum[i_6] + acc_s[((((rv_1 & 7) * 4) + (i_6 * 2)) + (rv_1 >> 3))]);
        }
        row_sum[i_6] = tl::AllReduce<tl::SumOp, 4, 1, 128, tl::NamedBarrier<256>>::run(row_sum[i_6]);
      }
      #pragma unroll
      for (int i_7 = 0; i_7 < 2; ++i_7) {
        denom[i_7] = ((denom[i_7] * row_scale[i_7]) + row_sum[i_7]);
      }
      #pragma unroll
      for (int i_8 = 0; i_8 < 64; ++i_8) {
        acc_o[i_8] = (acc_o[i_8] * row_scale[((i_8 & 3) >> 1)]);
      }
      #pragma unroll
      for (int i_9 = 0; i_9 < 8; ++i_9) {
        uint2 __1;
        float4 v_ = *(float4*)(acc_s + (i_9 * 4));
        ((half2*)(&__1))[0] = __float22half2_rn(((float2*)(&v_))[0]);
        ((half2*)(&__1))[1] = __float22half2_rn(((float2*)(&v_))[1]);
        *(uint2*)(p_cast + (i_9 * 4)) = __1;
      }
      mbarrier[(((kb_1 - max(0, ((((int)blockIdx.x) * 2) + ((seq_k - seq_q) >> 6)))) & 1) + 2)].wait((((kb_1 - max(0, ((((int)blockIdx.x) * 2) + ((seq_k - seq_q) >> 6)))) & 3) >> 1));
      {
        tl::GmmaDescriptor desc_b_1;
        tl::initialize_wgmma_descriptor<1, 512, 64>(desc_b_1, (&(((half_t*)v_s)[0])));
        tl::increase_descriptor_offset<int>(desc_b_1, ((kb_1 & 1) * 16384));
        tl::warpgroup_fence_operand(reinterpret_cast<uint32_t*>(p_cast + 0), 16);
        tl::warpgroup_fence_operand(reinterpret_cast<float*>(acc_o + 0), 128);
        tl::warpgroup_arrive();
        #pragma unroll
        for (int ki_1 = 0; ki_1 < 4; ++ki_1) {
          tl::wgmma_rs<tl::DataType::kFloat16, tl::DataType::kFloat16, tl::DataType::kFloat32, 64, 128, 16, false, true, 1, 1>(reinterpret_cast<const uint32_t*>(p_cast + (ki_1 * 8)), uint64_t(desc_b_1 + ((ki_1 * 2048) >> 4)), reinterpret_cast<uint32_t*>(acc_o + 0), 1);
        }
        tl::warpgroup_commit_batch();
        tl::warpgroup_wait<0>();
        tl::warpgroup_fence_operand(reinterpret_cast<float*>(acc_o + 0), 128);
        tl::warpgroup_fence_operand(reinterpret_cast<uint32_t*>(p_cast + 0), 16);
      }
      mbarrier[(((kb_1 - max(0, ((((int)blockIdx.x) * 2) + ((seq_k - seq_q) >> 6)))) & 1) + 6)].arrive();
    }
    #pragma unroll
    for (int i_10 = 0; i_10 < 2; ++i_10) {
      float condval_3;
      if ((row_max[i_10] == -CUDART_INF_F)) {
        condval_3 = exp2f((Sinks[((int)blockIdx.y)] * 0x1.71547652b82fep+0f/*1.442695e+00*/));
      } else {
        condval_3 = exp2f(((Sinks[((int)blockIdx.y)] * 0x1.71547652b82fep+0f/*1.442695e+00*/) - (row_max[i_10] * 0x1.0527dbd87e24dp-3f/*1.275174e-01*/)));
      }
      denom[i_10] = (denom[i_10] + condval_3);
    }
    #pragma unroll
    for (int i_11 = 0; i_11 < 64; ++i_11) {
      float condval_4;
      if ((denom[((i_11 & 3) >> 1)] == 0x0p+0f/*0.000000e+00*/)) {
        condval_4 = 0x0p+0f/*0.000000e+00*/;
      } else {
        condval_4 = (acc_o[i_11] / denom[((i_11 & 3) >> 1)]);
      }
      acc_o[i_11] = condval_4;
    }
    #pragma unroll
    for (int i_12 = 0; i_12 < 2; ++i_12) {
      float condval_5;
      if ((row_max[i_12] == -CUDART_INF_F)) {
        condval_5 = log2f(denom[i_12]);
      } else {
        condval_5 = (log2f(denom[i_12]) + (row_max[i_12] * 0x1.0527dbd87e24dp-3f/*1.275174e-01*/));
      }
      lse_f[i_12] = (condval_5 / 0x1.71547652b82fep+0f/*1.442695e+00*/);
    }
    tl::__sync_thread_partial(3, 192);
    #pragma unroll
    for (int i_13 = 0; i_13 < 8; ++i_13) {
      tl::ptx_stmatrix_m8n8_x4((&(((half_t*)o_s)[((((((i_13 >> 2) * 8192) + ((((int)threadIdx.x) >> 5) * 1024)) + (((((int)threadIdx.x) & 15) >> 3) * 512)) + ((((((((int)threadIdx.x) & 15) * 64) + (((((((int)threadIdx.x) & 7) >> 2) + ((i_13 & 3) >> 1)) & 1) * 32)) + (((((((int)threadIdx.x) & 3) >> 1) + (i_13 & 1)) & 1) * 16)) + (((((((int)threadIdx.x) & 31) >> 4) + (((int)threadIdx.x) & 1)) & 1) * 8)) & 511)) - 4096)])), __pack_half2(((half_t)acc_o[(i_13 * 8)]), ((half_t)acc_o[((i_13 * 8) + 1)])), __pack_half2(((half_t)acc_o[((i_13 * 8) + 2)]), ((half_t)acc_o[((i_13 * 8) + 3)])), __pack_half2(((half_t)acc_o[((i_13 * 8) + 4)]), ((half_t)acc_o[((i_13 * 8) + 5)])), __pack_half2(((half_t)acc_o[((i_13 * 8) + 6)]), ((half_t)acc_o[((i_13 * 8) + 7)])));
    }
    tl::__sync_thread_partial(3, 192);
    if (tl::tl_shuffle_elect<256>()) {
      tl::fence_proxy_async();
      tl::tma_store(Out_desc, (&(((half_t*)o_s)[0])), 0, (((int)blockIdx.x) * 128), ((int)blockIdx.y), ((int)blockIdx.z));
      tl::tma_store(Out_desc, (&(((half_t*)o_s)[8192])), 64, (((int)blockIdx.x) * 128), ((int)blockIdx.y), ((int)blockIdx.z));
      tl::tma_store_arrive();
      tl::tma_store_wait<0, true>();
    }
    if ((((int)threadIdx.x) % 4) == 0) {
      #pragma unroll
      for (int i_14 = 0; i_14 < 2; ++i_14) {
        if (((((((int)blockIdx.x) * 128) + ((((int)threadIdx.x) >> 5) * 16)) + (i_14 * 8)) + ((((int)threadIdx.x) & 31) >> 2)) < (seq_q + 64)) {
          Lse[(((((((((int64_t)((int)blockIdx.x)) * (int64_t)128) + ((((int64_t)((int)threadIdx.x)) >> (int64_t)5) * (int64_t)16)) + (((int64_t)i_14) * (int64_t)8)) + ((((int64_t)((int)blockIdx.z)) * ((int64_t)seq_q)) * (int64_t)2)) + ((((int64_t)((int)threadIdx.x)) & (int64_t)31) >> (int64_t)2)) + (((int64_t)((int)blockIdx.y)) * ((int64_t)seq_q))) - (int64_t)64)] = lse_f[i_14];
        }
      }
    }
  }
}

