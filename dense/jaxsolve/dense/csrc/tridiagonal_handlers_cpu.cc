// The CPU entry of the tridiagonal eigensolver (libjaxsolve_dense.so):
// tridiagonal_eigh.h's core over the machine's cores (rows dealt out in
// chunks), the eigenvalues sorted with std::stable_sort, each cluster's
// Gram-Schmidt on a team of one.
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <numeric>
#include <thread>
#include <vector>

#include "tridiagonal_eigh.h"
#include "tridiagonal_eigh_ffi.h"
#include "xla/ffi/api/ffi.h"

namespace jaxsolve::dense {
namespace {

namespace td = tridiagonal;

// Calls row(i, worker) for every i in [0, n), on up to hardware_concurrency()
// threads that take chunks of rows as they finish (rows differ in cost).
template <typename Row>
void ForRows(int64_t n, int workers, Row&& row) {
  constexpr int64_t kChunk = 16;
  std::atomic<int64_t> next{0};
  auto work = [&](int worker) {
    for (int64_t begin = next.fetch_add(kChunk); begin < n; begin = next.fetch_add(kChunk)) {
      for (int64_t i = begin; i < std::min(n, begin + kChunk); ++i) row(i, worker);
    }
  };
  std::vector<std::thread> threads;
  for (int worker = 1; worker < workers; ++worker) threads.emplace_back(work, worker);
  work(0);
  for (auto& thread : threads) thread.join();
}

int Workers(int64_t n) {
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return n < 256 ? 1 : cores;  // small matrices: not worth a thread
}

template <typename Real>
int TridiagonalEigh(const Real* d, const Real* e, int64_t n, Real* w, Real* z) {
  const int workers = Workers(n);
  std::vector<double> lambda(n);
  std::vector<td::Block> blocks(n);
  ForRows(n, workers,
          [&](int64_t i, int) { lambda[i] = td::RowEigenvalue(d, e, n, i, &blocks[i]); });
  std::vector<int64_t> order(n), rank(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return lambda[a] < lambda[b]; });
  for (int64_t k = 0; k < n; ++k) {
    w[k] = static_cast<Real>(lambda[order[k]]);
    rank[order[k]] = k;
  }
  if (z == nullptr) return 0;
  std::fill(z, z + n * n, Real{0});
  auto column = [&](int64_t row) { return td::Column<Real>{z + rank[row] * n, 1}; };
  std::vector<std::vector<td::DD>> pivots(workers), partial(workers);  // per worker
  std::atomic<int> unconverged{0};
  ForRows(n, workers, [&](int64_t i, int worker) {
    const td::Block& b = blocks[i];
    if (td::StartsCluster<Real>(lambda.data(), b, i)) {
      pivots[worker].resize(n);
      partial[worker].resize(n);
      td::SerialTeam team;
      td::ClusterVectors<Real>(team, d, e, b, lambda.data(), i, column, pivots[worker].data(),
                               partial[worker].data());
    } else if (!td::InCluster<Real>(lambda.data(), b, i) &&
               !td::SeparatedVector(d, e, b, lambda.data(), i, column(i))) {
      ++unconverged;
    }
  });
  return unconverged;
}

ffi::Error TridiagonalEighEntry(ffi::AnyBuffer d, ffi::AnyBuffer e, ffi::Result<ffi::AnyBuffer> w,
                                ffi::Result<ffi::AnyBuffer> z,
                                ffi::Result<ffi::Buffer<ffi::S32>> info) {
  return DispatchTridiagonalEigh(d, e, *w, *z, [&](auto d, auto e, int64_t n, auto w, auto z) {
    info->typed_data()[0] = TridiagonalEigh(d, e, n, w, z);
    return ffi::Error::Success();
  });
}

}  // namespace
}  // namespace jaxsolve::dense

JAXSOLVE_DENSE_TRIDIAGONAL_EXPORT XLA_FFI_Error* JaxsolveDenseTridiagonalEigh(
    XLA_FFI_CallFrame* call_frame);
XLA_FFI_DEFINE_HANDLER_SYMBOL(JaxsolveDenseTridiagonalEigh, jaxsolve::dense::TridiagonalEighEntry,
                              jaxsolve::dense::BindTridiagonalEigh(::xla::ffi::Ffi::Bind()));
