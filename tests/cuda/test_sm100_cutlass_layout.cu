/*
 * tests/cuda/test_sm100_cutlass_layout.cu - our SM100 scale-factor and
 * operand layouts (plugins/cuda/sm100_layout.h) against the layouts CUTLASS
 * 4.2's sm100 block-scaled GEMM derives for the same problem, on the host
 * (no GPU; no device code). sm100_gemm.cu asserts that its GEMMs use
 * exactly these configurations (cutlass::detail::Sm1xxBlockScaledConfig of
 * 16 for NVFP4, 32 for MXFP4).
 *
 * For each expert problem (M rows, K columns) the staging kernel writes
 * scale (m, kb) at fmcu_sm100_sf_offset(m, kb, K / vec) of the expert's
 * matrix and the finalize writes the weights' the same way; the GEMM reads
 * scale (m, k) at tile_atom_to_shape_SFA((M, N, K, 1))(m, k, 0). They must
 * agree for every m < M, k < K, and the layout must fit the bytes we
 * reserve (fmcu_sm100_sf_bytes). Exit 0 when all agree, 1 with the first
 * difference.
 */
#include <stdio.h>

#include "cute/tensor.hpp"
#include "cutlass/detail/sm100_blockscaled_layout.hpp"
#include "plugins/cuda/sm100_layout.h"

using namespace cute;

template <int VEC> static int check(int M, int N, int K)
{
    using Config = cutlass::detail::Sm1xxBlockScaledConfig<VEC>;
    const auto sfa = Config::tile_atom_to_shape_SFA(make_shape(M, N, K, 1));
    const auto sfb = Config::tile_atom_to_shape_SFB(make_shape(M, N, K, 1));
    const int64_t sf_cols = K / VEC;
    for (int m = 0; m < M; m++)
        for (int k = 0; k < K; k++) {
            const int64_t want = fmcu_sm100_sf_offset(m, k / VEC, sf_cols);
            const int64_t got = sfa(m, k, 0);
            if (got != want) {
                printf("FAIL vec %d, M %d K %d: SFA (%d, %d) at %lld, ours %lld\n", VEC, M, K, m, k, (long long)got,
                       (long long)want);
                return 1;
            }
        }
    for (int n = 0; n < N; n++)
        for (int k = 0; k < K; k += VEC) {
            const int64_t want = fmcu_sm100_sf_offset(n, k / VEC, sf_cols), got = sfb(n, k, 0);
            if (got != want) {
                printf("FAIL vec %d, N %d K %d: SFB (%d, %d) at %lld, ours %lld\n", VEC, N, K, n, k, (long long)got,
                       (long long)want);
                return 1;
            }
        }
    /* The bytes the layout spans fit the matrix we reserve per expert. */
    const int64_t span_a = cosize(filter_zeros(sfa)), span_b = cosize(filter_zeros(sfb));
    if (span_a > fmcu_sm100_sf_bytes(M, sf_cols) || span_b > fmcu_sm100_sf_bytes(N, sf_cols)) {
        printf("FAIL vec %d, M %d N %d K %d: layouts span %lld / %lld bytes, we reserve %lld / %lld\n", VEC, M, N, K,
               (long long)span_a, (long long)span_b, (long long)fmcu_sm100_sf_bytes(M, sf_cols),
               (long long)fmcu_sm100_sf_bytes(N, sf_cols));
        return 1;
    }
    return 0;
}

int main()
{
    /* Problem shapes of the model grid (K = H or I per rank) and tails:
     * M below, at and above a 128-row atom; K with 1-3 scale columns of a
     * 4-column atom left over. */
    const int ms[] = {1, 37, 128, 129, 300};
    const int nk[][2] = {{1536, 2048}, {2048, 768}, {192, 96}, {256, 160}, {64, 2112}};
    int bad = 0;
    for (int m : ms)
        for (const auto &p : nk) {
            bad |= check<16>(m, p[0], p[1]);
            bad |= check<32>(m, p[0], p[1]);
        }
    printf(bad ? "sm100 layouts: FAIL\n" : "sm100 layouts: our offsets are CUTLASS's for every shape\n");
    return bad;
}
