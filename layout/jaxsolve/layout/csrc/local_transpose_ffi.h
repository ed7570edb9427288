// The XLA FFI face of the local transpose, shared by the CPU and CUDA entries:
// the binding (operands, results, attributes), the checks of what XLA hands
// over, and the dtype switch into the templated core of local_transpose.h.
//
// Operands (see jaxsolve/layout/_native.py, which builds them):
//   x              F32/F64/C64/C128, the matrix: rows * cols elements (the
//                  row-major x, or the column-major Z as a (cols, rows) array)
//   chain_slots    (S,) S32      the chains' tile slots, chain after chain
//   chain_offsets  (G + 1,) S32  chain g: chain_slots[offsets[g]:offsets[g+1]]
//   chain_dest     (G,) S32      where chain g's last tile goes
// Results:
//   y              the converted matrix, shaped and aliased like x
//   scratch        (ScratchElements(...),) same dtype as x; contents unused
// Attributes:
//   rows, cols, tile                          the logical x, tiles T x T
//   batch_offsets (B + 1,), batch_rounds (B,)  the batches of chains
//
// Only the header-only FFI API is used, and nothing throws: every failure is
// an ffi::Error.
#ifndef JAXSOLVE_LAYOUT_CSRC_LOCAL_TRANSPOSE_FFI_H_
#define JAXSOLVE_LAYOUT_CSRC_LOCAL_TRANSPOSE_FFI_H_

#include <cstdint>
#include <string>
#include <utility>

#include "local_transpose.h"
#include "xla/ffi/api/ffi.h"

// The handler symbols are the libraries' only exports (build with
// -fvisibility=hidden).
#define JAXSOLVE_LAYOUT_EXPORT extern "C" __attribute__((visibility("default")))

namespace jaxsolve::layout {

namespace ffi = ::xla::ffi;

// Appends the operands, results and attributes above to `binding` (which may
// already hold context arguments, such as the CUDA stream).
template <typename Binding>
auto BindLocalTranspose(Binding binding) {
  return std::move(binding)
      .template Arg<ffi::AnyBuffer>()          // x
      .template Arg<ffi::Buffer<ffi::S32>>()  // chain_slots
      .template Arg<ffi::Buffer<ffi::S32>>()  // chain_offsets
      .template Arg<ffi::Buffer<ffi::S32>>()  // chain_dest
      .template Ret<ffi::AnyBuffer>()          // y
      .template Ret<ffi::AnyBuffer>()          // scratch
      .template Attr<int64_t>("rows")
      .template Attr<int64_t>("cols")
      .template Attr<int64_t>("tile")
      .template Attr<ffi::Span<const int64_t>>("batch_offsets")
      .template Attr<ffi::Span<const int64_t>>("batch_rounds");
}

inline std::string Str(int64_t v) { return std::to_string(v); }

inline ffi::Error Invalid(const std::string& what) {
  return ffi::Error::InvalidArgument("jaxsolve_layout local transpose: " +
                                     what);
}

// Checks what the host can see of a call: the geometry, buffer sizes and
// dtypes, and the batch structure.
inline ffi::Error CheckCall(const Geometry& g, ffi::AnyBuffer x,
                            ffi::AnyBuffer y, ffi::AnyBuffer scratch,
                            size_t num_slots, size_t num_offsets,
                            size_t num_chains,
                            ffi::Span<const int64_t> batch_offsets,
                            ffi::Span<const int64_t> batch_rounds) {
  if (g.tile < 1 || g.rows < 0 || g.cols < 0 || g.rows % g.tile != 0 ||
      g.cols % g.tile != 0) {
    return Invalid("rows=" + Str(g.rows) + " and cols=" + Str(g.cols) +
                   " must be non-negative multiples of tile=" + Str(g.tile));
  }
  const size_t elements = static_cast<size_t>(g.rows * g.cols);
  if (x.element_count() != elements || y.element_count() != elements) {
    return Invalid("x and y must hold rows*cols=" + Str(g.rows * g.cols) +
                   " elements");
  }
  if (y.element_type() != x.element_type() ||
      scratch.element_type() != x.element_type()) {
    return Invalid("y and scratch must have the dtype of x");
  }
  const bool moves_tiles = num_chains > 0;
  if (!moves_tiles && !g.square() && !g.empty()) {
    return Invalid("a rectangular matrix needs a schedule moving every tile");
  }
  const int64_t needed = ScratchElements(g, moves_tiles);
  if (scratch.element_count() != static_cast<size_t>(needed)) {
    return Invalid("scratch holds " + Str(scratch.element_count()) +
                   " elements, the conversion needs " + Str(needed));
  }
  if (num_offsets != num_chains + 1 ||
      num_slots != (moves_tiles ? static_cast<size_t>(g.num_tiles()) : 0)) {
    return Invalid("chain_offsets must have one more entry than chain_dest, "
                   "and chain_slots one entry per tile (none without chains)");
  }
  if (batch_offsets.size() != batch_rounds.size() + 1 ||
      batch_offsets.front() != 0 ||
      batch_offsets.back() != static_cast<int64_t>(num_chains)) {
    return Invalid("batch_offsets must run from 0 to the number of chains, "
                   "one entry more than batch_rounds");
  }
  for (size_t b = 0; b < batch_rounds.size(); ++b) {
    const int64_t chains = batch_offsets[b + 1] - batch_offsets[b];
    if (chains < 1 || chains > CycleCapacity(g) || batch_rounds[b] < 1) {
      return Invalid("batch " + Str(b) + " has " + Str(chains) +
                     " chains (must be 1 to " + Str(CycleCapacity(g)) +
                     ") and " + Str(batch_rounds[b]) +
                     " rounds (must be at least 1)");
    }
  }
  return ffi::Error::Success();
}

// Checks the chain values themselves; only where they are in host memory.
inline ffi::Error CheckChainValues(const Geometry& g, const ChainTable& chains,
                                   int64_t num_slots, int64_t num_chains,
                                   ffi::Span<const int64_t> batch_offsets,
                                   ffi::Span<const int64_t> batch_rounds) {
  if (chains.offsets[0] != 0 || chains.offsets[num_chains] != num_slots) {
    return Invalid("chain_offsets must run from 0 to the number of slots");
  }
  for (size_t b = 0; b < batch_rounds.size(); ++b) {
    for (int64_t c = batch_offsets[b]; c < batch_offsets[b + 1]; ++c) {
      const int64_t length = chains.offsets[c + 1] - chains.offsets[c];
      if (length < 1 || length > batch_rounds[b]) {
        return Invalid("chain " + Str(c) + " has length " + Str(length) +
                       ", must be 1 to its batch's rounds " +
                       Str(batch_rounds[b]));
      }
      if (chains.dest[c] < 0 || chains.dest[c] >= g.num_tiles()) {
        return Invalid("chain_dest out of range");
      }
    }
  }
  for (int64_t s = 0; s < num_slots; ++s) {
    if (chains.slots[s] < 0 || chains.slots[s] >= g.num_tiles()) {
      return Invalid("chain_slots out of range");
    }
  }
  return ffi::Error::Success();
}

template <typename T, typename Backend>
ffi::Error ConvertAs(Backend& backend, Direction direction, const Geometry& g,
                     const CycleSchedule& schedule, ffi::AnyBuffer x,
                     ffi::AnyBuffer y, ffi::AnyBuffer scratch) {
  T* data = static_cast<T*>(y.untyped_data());
  if (y.untyped_data() != x.untyped_data()) {
    // XLA aliases y with x; should it not, convert a copy.
    backend.Copy(data, static_cast<const T*>(x.untyped_data()),
                 g.rows * g.cols);
  }
  LocalTranspose(backend, direction, g, schedule, data,
                 static_cast<T*>(scratch.untyped_data()));
  return backend.Finish();
}

// The body of every local transpose handler: checks, then the dtype switch.
// `Backend` provides the primitives listed in local_transpose.h, plus
// `Finish()` (the error state after the work is issued) and `kHostMemory`
// (whether buffers are host memory, so that the chains can be checked).
template <typename Backend>
ffi::Error LocalTransposeHandler(
    Backend& backend, Direction direction, ffi::AnyBuffer x,
    ffi::Buffer<ffi::S32> chain_slots, ffi::Buffer<ffi::S32> chain_offsets,
    ffi::Buffer<ffi::S32> chain_dest, ffi::Result<ffi::AnyBuffer> y,
    ffi::Result<ffi::AnyBuffer> scratch, int64_t rows, int64_t cols,
    int64_t tile, ffi::Span<const int64_t> batch_offsets,
    ffi::Span<const int64_t> batch_rounds) {
  const Geometry g{rows, cols, tile};
  const size_t num_chains = chain_dest.element_count();
  if (ffi::Error error = CheckCall(
          g, x, *y, *scratch, chain_slots.element_count(),
          chain_offsets.element_count(), num_chains, batch_offsets,
          batch_rounds);
      error.failure()) {
    return error;
  }
  const CycleSchedule schedule{
      {chain_slots.typed_data(), chain_offsets.typed_data(),
       chain_dest.typed_data()},
      batch_offsets.begin(),
      batch_rounds.begin(),
      static_cast<int64_t>(batch_rounds.size())};
  if constexpr (Backend::kHostMemory) {
    if (ffi::Error error = CheckChainValues(
            g, schedule.chains,
            static_cast<int64_t>(chain_slots.element_count()),
            static_cast<int64_t>(num_chains), batch_offsets, batch_rounds);
        error.failure()) {
      return error;
    }
  }
  switch (x.element_type()) {
    case ffi::F32:
      return ConvertAs<float>(backend, direction, g, schedule, x, *y, *scratch);
    case ffi::F64:
      return ConvertAs<double>(backend, direction, g, schedule, x, *y,
                               *scratch);
    case ffi::C64:
      return ConvertAs<Complex64>(backend, direction, g, schedule, x, *y,
                                  *scratch);
    case ffi::C128:
      return ConvertAs<Complex128>(backend, direction, g, schedule, x, *y,
                                   *scratch);
    default:
      return Invalid("x must be F32, F64, C64 or C128, got dtype code " +
                     Str(static_cast<int64_t>(x.element_type())));
  }
}

}  // namespace jaxsolve::layout

#endif  // JAXSOLVE_LAYOUT_CSRC_LOCAL_TRANSPOSE_FFI_H_
