// CPU entry of libjaxsolve_sparse.so: the FFI handlers JaxsolveSparseCsrMatvec
// (target jaxsolve_sparse_csr_matvec), which runs the product of spmv.h,
// JaxsolveSparseCsrProduct (target jaxsolve_sparse_csr_product), the values of
// csr_product.h's sparse product, and JaxsolveSparseInterpolationWeights
// (target jaxsolve_sparse_interpolation_weights), classical AMG's weights of
// interpolation_weights.h, each a loop over rows, split over the cores by
// blocks of rows when large enough.
// (The library's other exports, the host setup kernels, are in
// pairwise_aggregation.cc, spgemm_symbolic.cc and weighted_graph.cc.)
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <vector>

#include "csr_product.h"
#include "csr_product_ffi.h"
#include "interpolation_weights.h"
#include "interpolation_weights_ffi.h"
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
            const int64_t y_offset = s.y_offset(pass, c);
            for (int64_t row = r0; row < r1; ++row) {
              const int64_t at = y_offset + row * s.k;
              a.y[at] = Updated(a, pass, row, at,
                                RowSum(values, a.indices, x, s.k, a.indptr[row],
                                       a.indptr[row + 1]));
            }
          }
        }
      });
    }
    return ffi::Error::Success();
  }
};

// Whether indptr (rows + 1 entries) runs from 0 to at most nnz without
// decreasing. Entries past the last row's end are padding, which no row reads
// (a hierarchy padded to size classes: _size_classes.py).
bool ValidRowPointers(const int32_t* indptr, int64_t rows, int64_t nnz) {
  if (indptr[0] != 0 || indptr[rows] > nnz) return false;
  for (int64_t i = 0; i < rows; ++i) {
    if (indptr[i + 1] < indptr[i]) return false;
  }
  return true;
}

struct CpuProductBackend {
  template <typename T>
  ffi::Error Run(const CsrProduct<T>& p, const CsrProductSizes& sizes,
                 const CsrProductBatch& batch) {
    if (!ValidRowPointers(p.a_indptr, p.m, sizes.nnz_a) ||
        !ValidRowPointers(p.b_indptr, sizes.n, sizes.nnz_b) ||
        !ValidRowPointers(p.c_indptr, p.m, sizes.nnz_c)) {
      return InvalidProduct("row pointers must run from 0 to their values' "
                            "count without decreasing");
    }
    for (int64_t e = 0; e < sizes.nnz_c; ++e) {
      if (p.c_indices[e] < 0 || p.c_indices[e] >= sizes.n_cols) {
        return InvalidProduct("C's column indices must be columns of B");
      }
    }
    int64_t products = 0;
    for (int64_t t = 0; t < sizes.nnz_a; ++t) {
      const int32_t j = p.a_indices[t];
      if (j < 0 || j >= sizes.n) {
        return InvalidProduct("A's column indices must be rows of B");
      }
      products += p.b_indptr[j + 1] - p.b_indptr[j];
    }
    std::atomic<bool> missing{false};
    ForRowBlocks(p.m, BlocksFor(products * batch.systems, kProductsPerThread),
                 [&](int64_t begin, int64_t end) {
                   std::vector<int32_t> table(sizes.n_cols, -1);
                   for (int64_t i = begin; i < end && !missing; ++i) {
                     const TabledRow row(table.data(), sizes.n_cols, p.c_indices,
                                         p.c_indptr[i], p.c_indptr[i + 1]);
                     for (int64_t s = 0; s < batch.systems; ++s) {
                       if (!CsrProductRow(SystemOf(p, batch, s), i, row)) missing = true;
                     }
                   }
                 });
    return missing ? InvalidProduct("a product's column is not in its row of C")
                   : ffi::Error::Success();
  }
};

// Whether every entry of values[0, count) lies in [low, high).
template <typename I>
bool AllWithin(const I* values, int64_t count, int64_t low, int64_t high) {
  for (int64_t e = 0; e < count; ++e) {
    if (values[e] < low || values[e] >= high) return false;
  }
  return true;
}

struct CpuInterpolationBackend {
  template <typename T, typename O>
  ffi::Error Run(const InterpolationCall<T, O>& call, const InterpolationSizes& sizes) {
    const InterpolationWeights<T, O>& in = call.first;
    const int64_t n = in.n, nnz = call.nnz;
    if (!ValidRowPointers(in.indptr, n, nnz) ||
        !ValidRowPointers(in.full_indptr, n, sizes.full_nnz) ||
        (call.keep != nullptr && !ValidRowPointers(call.p_indptr, n, call.p_nnz)) ||
        !ValidRowPointers(in.pair_indptr, n, sizes.pairs) ||
        !ValidRowPointers(in.triple_indptr, n, sizes.triples)) {
      return InvalidWeights("row pointers must run from 0 to their entries' count "
                            "without decreasing");
    }
    if (!AllWithin(in.indices, nnz, 0, n)) {
      return InvalidWeights("A's column indices must be its rows");
    }
    if (call.keep != nullptr) {
      for (int64_t i = 0; i < n; ++i) {
        if (!AllWithin(call.keep + call.p_indptr[i], call.p_indptr[i + 1] - call.p_indptr[i],
                       0, in.full_indptr[i + 1] - in.full_indptr[i])) {
          return InvalidWeights("keep must select weights of each row's own");
        }
      }
    }
    // The rest (offsets within their rows, each row's triples) InterpolationRow checks.
    std::atomic<bool> outside{false};
    const int64_t work = (nnz + sizes.triples) * call.systems;
    ForRowBlocks(n, BlocksFor(work, kProductsPerThread), [&](int64_t begin, int64_t end) {
      for (int64_t s = 0; s < call.systems; ++s) {
        for (int64_t i = begin; i < end; ++i) {
          if (!InterpolationCallRow(call, s, static_cast<int32_t>(i))) outside = true;
        }
      }
    });
    return outside ? InvalidWeights("the plan sends a value outside its row of P or reads "
                                    "an entry outside its row of A")
                   : ffi::Error::Success();
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

XLA_FFI_DEFINE_HANDLER_SYMBOL(JaxsolveSparseInterpolationWeights,
                              js::InterpolationWeightsHandler<js::CpuInterpolationBackend>,
                              js::BindInterpolationWeights());
