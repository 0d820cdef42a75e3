// Solve A x = b for a random A with magma_dgesv_gpu (LU on the GPU with CPU panels) and check the
// answer two ways: the scaled residual ||A x - b|| / (||A|| ||x|| n eps) and the distance to a
// CPU solve (Gaussian elimination with partial pivoting, written out here so that the check
// does not trust the LAPACK magma itself calls). Then magmablas_dgemm (magma's own GEMM kernel, not
// cuBLAS: the one a CUDA-12 patch once left out of libmagma.a) against a CPU product. Then
// magma_dgesdd, the routine PyTorch's magma backend calls for torch.linalg.svd: on tall, wide and
// square matrices the singular values of jobz A (full U and VT, full_matrices=True), S (thin) and
// N (values only) must agree, add up to the Frobenius norm (sum s_i^2 = ||A||_F^2) and, with
// vectors, rebuild A (2.6.0 + CUDA 13.0's test_svd saw full_matrices=True values go wrong on one of
// its CUDA paths). Prints one line; exit 0 only when everything agrees.
#include <magma_v2.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <random>
#include <utility>
#include <vector>

static double inf_norm(const std::vector<double>& v) {
    double m = 0;
    for (double x : v) m = std::max(m, std::fabs(x));
    return m;
}

// Column-major n x n A, one right-hand side; returns false when A is singular.
static bool cpu_solve(std::vector<double> a, std::vector<double> b, long n, std::vector<double>& x) {
    for (long k = 0; k < n; ++k) {
        long p = k;
        for (long i = k + 1; i < n; ++i)
            if (std::fabs(a[i + k * n]) > std::fabs(a[p + k * n])) p = i;
        if (a[p + k * n] == 0) return false;
        if (p != k) {
            for (long j = 0; j < n; ++j) std::swap(a[k + j * n], a[p + j * n]);
            std::swap(b[k], b[p]);
        }
        for (long i = k + 1; i < n; ++i) {  // multipliers in column k, then column-wise updates
            a[i + k * n] /= a[k + k * n];
            b[i] -= a[i + k * n] * b[k];
        }
        for (long j = k + 1; j < n; ++j) {
            const double akj = a[k + j * n];
            for (long i = k + 1; i < n; ++i) a[i + j * n] -= a[i + k * n] * akj;
        }
    }
    x.assign(n, 0);
    for (long i = n - 1; i >= 0; --i) {
        double s = b[i];
        for (long j = i + 1; j < n; ++j) s -= a[i + j * n] * x[j];
        x[i] = s / a[i + i * n];
    }
    return true;
}

// The largest disagreement, relative to the largest singular value, between the singular values
// of magma_dgesdd's three jobz modes, the Frobenius identity and the rebuilt A; INFINITY when a
// call reports info != 0.
static double svd_disagreement(magma_int_t m, magma_int_t n, std::mt19937_64& rng) {
    std::uniform_real_distribution<double> uniform(-1.0, 1.0);
    const magma_int_t k = std::min(m, n);
    std::vector<double> a(size_t(m) * n);
    for (double& v : a) v = uniform(rng);
    double frob2 = 0, a_max = 0;
    for (double v : a) {
        frob2 += v * v;
        a_max = std::max(a_max, std::fabs(v));
    }
    std::vector<std::vector<double>> values;
    double worst = 0;
    for (magma_vec_t jobz : {MagmaAllVec, MagmaSomeVec, MagmaNoVec}) {
        std::vector<double> work_a(a), s(k);
        const magma_int_t ucols = jobz == MagmaAllVec ? m : k;
        const magma_int_t ldvt = jobz == MagmaAllVec ? n : k;
        const bool vectors = jobz != MagmaNoVec;
        std::vector<double> u(vectors ? size_t(m) * ucols : 1), vt(vectors ? size_t(ldvt) * n : 1);
        std::vector<magma_int_t> iwork(8 * size_t(k));
        magma_int_t info = 0;
        double query = 0;
        magma_dgesdd(jobz, m, n, work_a.data(), m, s.data(), u.data(), vectors ? m : 1, vt.data(),
                     vectors ? ldvt : 1, &query, -1, iwork.data(), &info);
        if (info != 0) return INFINITY;
        std::vector<double> work(std::max<size_t>(1, size_t(query)));
        magma_dgesdd(jobz, m, n, work_a.data(), m, s.data(), u.data(), vectors ? m : 1, vt.data(),
                     vectors ? ldvt : 1, work.data(), magma_int_t(work.size()), iwork.data(), &info);
        if (info != 0) return INFINITY;
        if (vectors) {  // A = U[:, :k] diag(s) VT[:k, :]
            for (magma_int_t j = 0; j < n; ++j)
                for (magma_int_t i = 0; i < m; ++i) {
                    double sum = 0;
                    for (magma_int_t l = 0; l < k; ++l) sum += u[i + l * size_t(m)] * s[l] * vt[l + j * size_t(ldvt)];
                    worst = std::max(worst, std::fabs(sum - a[i + j * size_t(m)]) / a_max);
                }
        }
        values.push_back(s);
    }
    const double s_max = values[0].empty() ? 1.0 : std::max(values[0][0], 1e-300);
    for (const auto& s : values) {
        double sum2 = 0;
        for (magma_int_t l = 0; l < k; ++l) {
            sum2 += s[l] * s[l];
            worst = std::max(worst, std::fabs(s[l] - values[2][l]) / s_max);  // against values only
        }
        worst = std::max(worst, std::fabs(sum2 - frob2) / frob2);
    }
    return worst;
}

int main(int argc, char** argv) {
    const magma_int_t n = argc > 1 ? std::atoi(argv[1]) : 1024;
    if (n < 1 || n > 16384) {
        std::fprintf(stderr, "usage: %s [N (1..16384)]\n", argv[0]);
        return 2;
    }
    if (magma_init() != MAGMA_SUCCESS) {
        std::fprintf(stderr, "magma_init failed (no usable GPU?)\n");
        return 1;
    }
    magma_device_t device;
    magma_getdevice(&device);
    magma_queue_t queue;
    magma_queue_create(device, &queue);

    std::mt19937_64 rng(20261123);
    std::uniform_real_distribution<double> uniform(-1.0, 1.0);
    std::vector<double> a(size_t(n) * n), b(n), x(n), x_cpu;  // column-major, lda = n
    for (double& v : a) v = uniform(rng);
    for (double& v : b) v = uniform(rng);

    magmaDouble_ptr d_a = nullptr, d_b = nullptr;
    if (magma_dmalloc(&d_a, size_t(n) * n) != MAGMA_SUCCESS || magma_dmalloc(&d_b, n) != MAGMA_SUCCESS) {
        std::fprintf(stderr, "magma_dmalloc failed\n");
        return 1;
    }
    magma_dsetmatrix(n, n, a.data(), n, d_a, n, queue);
    magma_dsetmatrix(n, 1, b.data(), n, d_b, n, queue);
    std::vector<magma_int_t> ipiv(n);
    magma_int_t info = 0;
    real_Double_t t0 = magma_sync_wtime(queue);
    magma_dgesv_gpu(n, 1, d_a, n, ipiv.data(), d_b, n, &info);
    real_Double_t seconds = magma_sync_wtime(queue) - t0;
    magma_dgetmatrix(n, 1, d_b, n, x.data(), n, queue);

    std::vector<double> r(b);
    double a_norm = 0;
    for (magma_int_t i = 0; i < n; ++i) {
        double row = 0;
        for (magma_int_t j = 0; j < n; ++j) {
            r[i] -= a[i + j * size_t(n)] * x[j];
            row += std::fabs(a[i + j * size_t(n)]);
        }
        a_norm = std::max(a_norm, row);
    }
    const double eps = std::numeric_limits<double>::epsilon();
    const double residual = inf_norm(r) / (a_norm * inf_norm(x) * n * eps);
    const bool cpu_ok = cpu_solve(a, b, n, x_cpu);
    std::vector<double> diff(n);
    for (magma_int_t i = 0; i < n; ++i) diff[i] = x[i] - (cpu_ok ? x_cpu[i] : 0.0);
    const double rel_diff = cpu_ok ? inf_norm(diff) / inf_norm(x_cpu) : INFINITY;

    // C = A_m * B_m with magmablas_dgemm on the leading m x m blocks of the random A (lda = n).
    const magma_int_t m = std::min<magma_int_t>(n, 256);
    std::vector<double> am(size_t(m) * m), bm(size_t(m) * m), cm(size_t(m) * m), c_cpu(size_t(m) * m, 0.0);
    for (magma_int_t j = 0; j < m; ++j)
        for (magma_int_t i = 0; i < m; ++i) {
            am[i + j * size_t(m)] = a[i + j * size_t(n)];
            bm[i + j * size_t(m)] = a[j + i * size_t(n)];  // A transposed: a different matrix
        }
    magmaDouble_ptr d_am = nullptr, d_bm = nullptr, d_cm = nullptr;
    magma_dmalloc(&d_am, size_t(m) * m);
    magma_dmalloc(&d_bm, size_t(m) * m);
    magma_dmalloc(&d_cm, size_t(m) * m);
    magma_dsetmatrix(m, m, am.data(), m, d_am, m, queue);
    magma_dsetmatrix(m, m, bm.data(), m, d_bm, m, queue);
    magmablas_dgemm(MagmaNoTrans, MagmaNoTrans, m, m, m, 1.0, d_am, m, d_bm, m, 0.0, d_cm, m, queue);
    magma_dgetmatrix(m, m, d_cm, m, cm.data(), m, queue);
    for (magma_int_t j = 0; j < m; ++j)
        for (magma_int_t k = 0; k < m; ++k)
            for (magma_int_t i = 0; i < m; ++i) c_cpu[i + j * size_t(m)] += am[i + k * size_t(m)] * bm[k + j * size_t(m)];
    double gemm_err = 0, c_norm = 0;
    for (size_t i = 0; i < cm.size(); ++i) {
        gemm_err = std::max(gemm_err, std::fabs(cm[i] - c_cpu[i]));
        c_norm = std::max(c_norm, std::fabs(c_cpu[i]));
    }
    const double gemm_rel = c_norm > 0 ? gemm_err / c_norm : gemm_err;
    magma_free(d_am);
    magma_free(d_bm);
    magma_free(d_cm);

    // SVD shapes: test_svd's small ones (12x4, 4x12, 4x4) and two past magma's CPU crossover
    double svd_err = 0;
    for (auto [sm, sn] : {std::pair<magma_int_t, magma_int_t>{12, 4}, {4, 12}, {4, 4}, {300, 200}, {200, 300}})
        svd_err = std::max(svd_err, svd_disagreement(sm, sn, rng));

    const bool ok = info == 0 && residual < 30.0 && rel_diff < 1e-6 && gemm_rel < 1e-12 && svd_err < 1e-10;
    std::printf("magma %d.%d.%d magma_dgesv_gpu n=%lld info=%lld scaled_residual=%.3g cpu_rel_diff=%.3g "
                "gpu_seconds=%.4f magmablas_dgemm m=%lld rel_err=%.3g magma_dgesdd A/S/N worst=%.3g: %s\n",
                MAGMA_VERSION_MAJOR, MAGMA_VERSION_MINOR, MAGMA_VERSION_MICRO, (long long)n, (long long)info,
                residual, rel_diff, seconds, (long long)m, gemm_rel, svd_err, ok ? "PASS" : "FAIL");
    magma_free(d_a);
    magma_free(d_b);
    magma_queue_destroy(queue);
    magma_finalize();
    return ok ? 0 : 1;
}
