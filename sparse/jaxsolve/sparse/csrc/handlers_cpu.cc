// CPU entry of libjaxsolve_sparse.so: the FFI handlers JaxsolveSparseCsrMatvec
// (target jaxsolve_sparse_csr_matvec), which runs the product of spmv.h, and
// JaxsolveSparseCsrProduct (target jaxsolve_sparse_csr_product), the values of
// csr_product.h's sparse product, each a loop over rows (the matrix-vector
// product's split over the cores by blocks of rows when large enough).
// (The library's other exports, the host setup kernels, are in
// pairwise_aggregation.cc, spgemm_symbolic.cc and weighted_graph.cc.)
#include <algorithm>
#include <cstdint>

#include "csr_product.h"
#include "csr_product_ffi.h"
#include "row_blocks.h"
#include "spmv.h"
#include "spmv_ffi.h"
#include "xla/ffi/api/ffi.h"

namespace jaxsolve::sparse {
namespace {

// Rows a block of the loop: every column of a pass is formed for one block of
// rows before the next, so that the block's entries are read from the cache
// after the first column.
constexpr int64_t kRowBlock = 256;
// Products a thread must have to be worth starting (a few hundred microseconds).
constexpr int64_t kProductsPerThread = int64_t{1} << 18;

struct CpuBackend {
  template <typename T>
  ffi::Error Run(const Spmv<T>& a) {
    const SpmvShape& s = a.shape;
    const int64_t blocks = BlocksFor(s.nnz * s.columns(), kProductsPerThread);
    for (int64_t pass = 0; pass < s.passes(); ++pass) {
      const T* values = a.values + s.value_offset(pass);
      ForRowBlocks(s.n_rows, blocks, [&](int64_t begin, int64_t end) {
        for (int64_t r0 = begin; r0 < end; r0 += kRowBlock) {
          const int64_t r1 = std::min(r0 + kRowBlock, end);
          for (int64_t c = 0; c < s.columns(); ++c) {
            const T* x = a.x + s.x_offset(pass, c);
            T* y = a.y + s.y_offset(pass, c);
            for (int64_t row = r0; row < r1; ++row) {
              y[row * s.k] = RowSum(values, a.indices, x, s.k, a.indptr[row],
                                    a.indptr[row + 1]);
            }
          }
        }
      });
    }
    return ffi::Error::Success();
  }
};

struct CpuProductBackend {
  template <typename T, typename Offset>
  bool Run(const CsrProduct<T, Offset>& p) {
    return CsrProductRows(p, 0, p.m, 0);
  }
};

}  // namespace
}  // namespace jaxsolve::sparse

namespace js = ::jaxsolve::sparse;

XLA_FFI_DEFINE_HANDLER_SYMBOL(JaxsolveSparseCsrMatvec,
                              js::CsrMatvecHandler<js::CpuBackend>,
                              js::BindCsrMatvec());

XLA_FFI_DEFINE_HANDLER_SYMBOL(JaxsolveSparseCsrProduct,
                              js::CsrProductHandler<js::CpuProductBackend>,
                              js::BindCsrProduct());
