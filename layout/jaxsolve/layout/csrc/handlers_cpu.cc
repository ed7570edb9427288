// CPU entries of libjaxsolve_layout.so: the FFI handlers
// JaxsolveLayoutLocalRowToColumnMajor / JaxsolveLayoutLocalColumnToRowMajor
// (targets jaxsolve_layout_local_{row_to_column,column_to_row}_major), which
// run the core of local_transpose.h as plain loops, and
// JaxsolveLayoutLocalScratchElements, the scratch size the Python side
// declares.
#include <algorithm>
#include <cstdint>
#include <utility>

#include "local_transpose.h"
#include "local_transpose_ffi.h"
#include "xla/ffi/api/ffi.h"

namespace jaxsolve::layout {
namespace {

// The primitives of local_transpose.h as single-threaded loops.
struct CpuBackend {
  static constexpr bool kHostMemory = true;

  template <typename T>
  void Copy(T* dst, const T* src, int64_t n) {
    std::copy_n(src, n, dst);
  }

  template <typename T>
  void SquareTranspose(T* data, int64_t n) {
    constexpr int64_t kBlock = TransposeBlock<T>();
    const int64_t pairs = NumBlockPairs(n, kBlock);
    for (int64_t k = 0; k < pairs; ++k) {
      const BlockPair p = NthBlockPair(k);
      const int64_t r0 = p.bi * kBlock, c0 = p.bj * kBlock;
      const int64_t r1 = std::min(r0 + kBlock, n);
      const int64_t c1 = std::min(c0 + kBlock, n);
      for (int64_t r = r0; r < r1; ++r) {
        // On a diagonal block, swap only the elements above the diagonal.
        for (int64_t c = p.bi == p.bj ? r + 1 : c0; c < c1; ++c) {
          std::swap(data[r * n + c], data[c * n + r]);
        }
      }
    }
  }

  template <typename Map>
  void CopyRuns(const Map& map, int64_t count, int64_t length) {
    for (int64_t p = 0; p < count; ++p) {
      const Run<typename Map::Element> run = map(p);
      if (run.src != nullptr) std::copy_n(run.src, length, run.dst);
    }
  }

  template <typename Map>
  void TransposeBlocks(const Map& map, int64_t count, int64_t size) {
    for (int64_t z = 0; z < count; ++z) {
      const Block<typename Map::Element> block = map(z);
      if (block.src == nullptr) continue;
      for (int64_t r = 0; r < size; ++r) {
        for (int64_t c = 0; c < size; ++c) {
          block.dst[c * block.dst_ld + r] = block.src[r * block.src_ld + c];
        }
      }
    }
  }

  ffi::Error Finish() { return ffi::Error::Success(); }
};

template <Direction kDirection>
struct LocalTransposeCpu {
  template <typename... Args>
  ffi::Error operator()(Args... args) const {
    CpuBackend backend;
    return LocalTransposeHandler(backend, kDirection, std::move(args)...);
  }
};

}  // namespace
}  // namespace jaxsolve::layout

namespace jl = ::jaxsolve::layout;

JAXSOLVE_LAYOUT_EXPORT XLA_FFI_Error* JaxsolveLayoutLocalRowToColumnMajor(
    XLA_FFI_CallFrame* call_frame);
JAXSOLVE_LAYOUT_EXPORT XLA_FFI_Error* JaxsolveLayoutLocalColumnToRowMajor(
    XLA_FFI_CallFrame* call_frame);

XLA_FFI_DEFINE_HANDLER_SYMBOL(
    JaxsolveLayoutLocalRowToColumnMajor,
    jl::LocalTransposeCpu<jl::Direction::kRowToColumnMajor>{},
    jl::BindLocalTranspose(jl::ffi::Ffi::Bind()));

XLA_FFI_DEFINE_HANDLER_SYMBOL(
    JaxsolveLayoutLocalColumnToRowMajor,
    jl::LocalTransposeCpu<jl::Direction::kColumnToRowMajor>{},
    jl::BindLocalTranspose(jl::ffi::Ffi::Bind()));

// Elements of scratch the conversion of a rows x cols matrix with tiles of
// tile x tile needs, for either direction and platform; `moves_tiles` is
// nonzero unless the matrix is square and the tile permutation the identity.
// -1 for an invalid geometry.
JAXSOLVE_LAYOUT_EXPORT int64_t JaxsolveLayoutLocalScratchElements(
    int64_t rows, int64_t cols, int64_t tile, int32_t moves_tiles) {
  if (tile < 1 || rows < 0 || cols < 0 || rows % tile || cols % tile) {
    return -1;
  }
  return jl::ScratchElements(jl::Geometry{rows, cols, tile}, moves_tiles != 0);
}
