// The XLA FFI binding of classical AMG's interpolation weights
// (interpolation_weights.h): one handler, JaxsolveSparseInterpolationWeights
// (target jaxsolve_sparse_interpolation_weights), templated on a backend that
// schedules InterpolationCallRow. Its values carry a leading axis of systems
// (vmap over values): A's values and diagonal one row a system, P's values
// likewise. It checks the buffers' sizes against one another; what the plan
// holds is the backend's to check (the CPU's, on the host, checks it all; the
// GPU's trusts it, as the setup that built it made it valid).
#ifndef JAXSOLVE_SPARSE_CSRC_INTERPOLATION_WEIGHTS_FFI_H_
#define JAXSOLVE_SPARSE_CSRC_INTERPOLATION_WEIGHTS_FFI_H_

#include <cstdint>
#include <string>

#include "export.h"
#include "interpolation_weights.h"
#include "spmv.h"
#include "spmv_ffi.h"
#include "xla/ffi/api/ffi.h"

JAXSOLVE_SPARSE_EXPORT XLA_FFI_Error* JaxsolveSparseInterpolationWeights(
    XLA_FFI_CallFrame* call_frame);

namespace jaxsolve::sparse {

namespace ffi = ::xla::ffi;

inline auto BindInterpolationWeights() {
  return ffi::Ffi::Bind()
      .Arg<ffi::AnyBuffer>()          // values (systems, nnz(A))
      .Arg<ffi::AnyBuffer>()          // diagonal (systems, n)
      .Arg<ffi::Buffer<ffi::S32>>()  // indices (nnz(A),)
      .Arg<ffi::Buffer<ffi::S32>>()  // indptr (n + 1,)
      .Arg<ffi::Buffer<ffi::PRED>>()  // coarse (n,)
      .Arg<ffi::Buffer<ffi::S32>>()  // full_indptr (n + 1,): untruncated P's
      .Arg<ffi::AnyBuffer>()          // a_targets (nnz(A),), of the offset type O
      .Arg<ffi::Buffer<ffi::S32>>()  // pair_indptr (n + 1,)
      .Arg<ffi::AnyBuffer>()          // pair_offsets (pairs,), O
      .Arg<ffi::AnyBuffer>()          // pair_counts (pairs,), O
      .Arg<ffi::Buffer<ffi::S32>>()  // triple_indptr (n + 1,)
      .Arg<ffi::AnyBuffer>()          // triple_offsets (triples,), O
      .Arg<ffi::AnyBuffer>()          // triple_targets (triples,), O
      .Arg<ffi::AnyBuffer>()          // keep (nnz(P),), O: offsets in P's full rows, or (0,)
      .Arg<ffi::Buffer<ffi::S32>>()  // p_indptr (n + 1,)
      .Ret<ffi::AnyBuffer>()          // p_values (systems, nnz(P))
      .Ret<ffi::Buffer<ffi::U8>>()   // scratch (systems, full_nnz * sizeof(Sum))
      .Attr<int64_t>("truncated");    // whether `keep` selects P's entries
}

inline ffi::Error InvalidWeights(const std::string& what) {
  return ffi::Error::InvalidArgument("jaxsolve_sparse_interpolation_weights: " + what);
}

// The sizes a backend checks the plan against.
struct InterpolationSizes {
  int64_t full_nnz, pairs, triples;
};

// run(O{}) for the plan's offset type O: U8, U16 or U32.
template <typename Run>
ffi::Error WithOffsetElementType(ffi::DataType type, Run run, ffi::Error unsupported) {
  switch (type) {
    case ffi::U8:
      return run(uint8_t{});
    case ffi::U16:
      return run(uint16_t{});
    case ffi::U32:
      return run(uint32_t{});
    default:
      return unsupported;
  }
}

// The body of the weights' handlers: checks, then the dtype switches into
// `Backend{context...}.Run<T, O>(InterpolationCall<T, O>, InterpolationSizes)`,
// which returns the call's ffi::Error.
template <typename Backend, typename... Context>
ffi::Error InterpolationWeightsHandler(
    ffi::AnyBuffer values, ffi::AnyBuffer diagonal, ffi::Buffer<ffi::S32> indices,
    ffi::Buffer<ffi::S32> indptr, ffi::Buffer<ffi::PRED> coarse,
    ffi::Buffer<ffi::S32> full_indptr, ffi::AnyBuffer a_targets,
    ffi::Buffer<ffi::S32> pair_indptr, ffi::AnyBuffer pair_offsets,
    ffi::AnyBuffer pair_counts, ffi::Buffer<ffi::S32> triple_indptr,
    ffi::AnyBuffer triple_offsets, ffi::AnyBuffer triple_targets, ffi::AnyBuffer keep,
    ffi::Buffer<ffi::S32> p_indptr, ffi::Result<ffi::AnyBuffer> p_values,
    ffi::Result<ffi::Buffer<ffi::U8>> scratch, int64_t truncated, Context... context) {
  const auto count = [](const auto& buffer) {
    return static_cast<int64_t>(buffer.element_count());
  };
  const int64_t n = count(indptr) - 1, nnz = count(indices);
  const int64_t pairs = count(pair_offsets), triples = count(triple_offsets);
  const auto values_dims = values.dimensions();
  const auto diagonal_dims = diagonal.dimensions();
  const auto p_dims = p_values->dimensions();
  const auto scratch_dims = scratch->dimensions();
  if (values_dims.size() != 2 || diagonal_dims.size() != 2 || p_dims.size() != 2 ||
      scratch_dims.size() != 2) {
    return InvalidWeights("values, diagonal, P's values and the scratch must be "
                          "(systems, entries) arrays");
  }
  const int64_t systems = values_dims[0];
  if (n < 0 || values_dims[1] != nnz || diagonal_dims[1] != n || count(coarse) != n ||
      count(full_indptr) != n + 1 || count(p_indptr) != n + 1 ||
      count(pair_indptr) != n + 1 || count(triple_indptr) != n + 1 ||
      count(a_targets) != nnz || count(pair_counts) != pairs ||
      count(triple_targets) != triples || diagonal_dims[0] != systems ||
      p_dims[0] != systems || scratch_dims[0] != systems) {
    return InvalidWeights("the plan's arrays must fit A's pattern and one another");
  }
  if (diagonal.element_type() != values.element_type() ||
      p_values->element_type() != values.element_type()) {
    return InvalidWeights("values, diagonal and P's values must have one dtype");
  }
  const ffi::DataType offsets = a_targets.element_type();
  if (pair_offsets.element_type() != offsets || pair_counts.element_type() != offsets ||
      triple_offsets.element_type() != offsets || triple_targets.element_type() != offsets ||
      keep.element_type() != offsets) {
    return InvalidWeights("the plan's offsets and targets must have one dtype");
  }
  auto run = [&](auto zero, auto offset) -> ffi::Error {
    using T = decltype(zero);
    using O = decltype(offset);
    using Sum = typename Scalar<T>::Sum;
    if (scratch_dims[1] % static_cast<int64_t>(sizeof(Sum)) != 0) {
      return InvalidWeights("the scratch must hold whole sums");
    }
    const int64_t full_nnz = scratch_dims[1] / static_cast<int64_t>(sizeof(Sum));
    if (p_dims[1] != (truncated ? count(keep) : full_nnz)) {
      return InvalidWeights("P must have a value for each weight kept");
    }
    const auto typed = [](const ffi::AnyBuffer& buffer) {
      return static_cast<const O*>(buffer.untyped_data());
    };
    const InterpolationWeights<T, O> first{
        static_cast<int32_t>(n),
        indptr.typed_data(),
        indices.typed_data(),
        static_cast<const T*>(values.untyped_data()),
        static_cast<const T*>(diagonal.untyped_data()),
        reinterpret_cast<const uint8_t*>(coarse.typed_data()),
        full_indptr.typed_data(),
        typed(a_targets),
        pair_indptr.typed_data(),
        typed(pair_offsets),
        typed(pair_counts),
        triple_indptr.typed_data(),
        typed(triple_offsets),
        typed(triple_targets)};
    const InterpolationCall<T, O> call{first,
                                       systems,
                                       nnz,
                                       p_dims[1],
                                       truncated ? typed(keep) : nullptr,
                                       p_indptr.typed_data(),
                                       static_cast<T*>(p_values->untyped_data()),
                                       reinterpret_cast<Sum*>(scratch->typed_data())};
    return Backend{context...}.template Run<T, O>(
        call, InterpolationSizes{full_nnz, pairs, triples});
  };
  if (n > INT32_MAX - 1) return InvalidWeights("too many rows");
  return WithValueElementType(
      values.element_type(),
      [&](auto zero) {
        return WithOffsetElementType(
            offsets, [&](auto offset) { return run(zero, offset); },
            InvalidWeights("the plan's offsets must be U8, U16 or U32"));
      },
      InvalidWeights("values must be F32, F64, C64 or C128"));
}

}  // namespace jaxsolve::sparse

#endif  // JAXSOLVE_SPARSE_CSRC_INTERPOLATION_WEIGHTS_FFI_H_
