// Local part of the conversion between JAX's (row-major) layout and the 2D
// block-cyclic (column-major, tiled) layout of ScaLAPACK / cuSOLVERMp.
//
// One device holds an R x C matrix `x` in row-major order. The conversion
// rewrites that buffer, in place, into the column-major R x C matrix `Z`
// whose T x T tiles are `x`'s tiles permuted: tile (i, j) of `x` lands at
// tile position sigma(i, j) of `Z`. The inverse direction undoes it.
//
// This header is the one templated core shared by the CPU and CUDA entries
// (handlers_cpu.cc, handlers_cuda.cu). It knows nothing of XLA: the
// algorithm `LocalTranspose` is written against a `Backend` that offers
// four data-parallel primitives,
//
//   Copy(dst, src, n)              contiguous copy, no overlap
//   SquareTranspose(data, n)       in-place transpose of an n x n matrix
//   CopyRuns(map, count, length)   for p < count, copy `length` contiguous
//                                  elements from map(p).src to map(p).dst
//   TransposeBlocks(map, count, size)
//                                  for z < count, write the transpose of the
//                                  size x size block map(z).src to map(z).dst
//
// (no two runs or blocks of one call overlap; a null src skips one), and the
// CPU backend runs them as loops, the CUDA backend as kernels on a stream.
// All index math lives here in inline functions that compile for host and
// device alike.
//
// The algorithm, for an R x C matrix in T x T tiles (nR = R/T tile rows,
// nC = C/T tile columns, N = nR * nC tiles). A "slot" is the place of one
// tile; every tile sits in a slot as T rows of T contiguous elements.
//
//  * R == C, identity tile permutation (the hot path): transpose the matrix
//    in place by swapping mirrored blocks (32 x 32, or 64 x 64 for 4-byte
//    elements); one read and one write per element, like a copy.
//  * R == C, any other permutation: slot i * nR + j is the region of tile
//    (i, j) of the row-major matrix, leading dimension R. Column-major tile
//    (pi, pj) of Z occupies the region of row-major tile (pj, pi),
//    transposed. So tile (i, j) moves, transposed, from slot i * nR + j to
//    slot pj * nR + pi: one pass of transposing tile moves (cycle following,
//    below), again about one read and one write per element.
//  * R != C, row-major -> column-major:
//      1. for each tile row (a T x C panel, contiguous): copy it to scratch
//         and write it back as nC contiguous row-major tiles, so that tile
//         (i, j) sits at slot i * nC + j (start s * T * T, leading dim T);
//      2. move every tile, transposed, to slot pj * nR + pi, where it is the
//         column-major tile (pi, pj) of Z;
//      3. for each tile column (nR contiguous tiles): copy them to scratch and
//         write them back interleaved as a column-major R x T panel.
//    Column-major -> row-major runs the inverse steps in reverse order.
//
// Tile moves follow the cycles of the slot permutation. It is decomposed
// into cycles on the host (in Python; fixed points are cycles of one, as
// their tile must still be transposed) and each cycle is cut into chains of
// at most ceil(N / capacity) slots, where `capacity` is the number of tiles
// the scratch holds. Chains are grouped into batches of at most `capacity`
// chains that hold whole cycles. A batch runs in steps, each data-parallel
// over the batch's chains. For a chain c_0 .. c_{n-1}, with c_n standing for
// the chain's scratch tile:
//
//   step r = 0, 1, ... (while r < n): the tile in c_{n-1-r} moves, transposed,
//            to c_{n-r} (step 0 saves the last tile to scratch);
//   restore: the scratch tile is copied to the first slot of the next chain
//            of its cycle (`dest`).
//
// Scratch is T * max(R, C) elements (none for the square, identity case): one
// panel, or `capacity` = max(nR, nC) tiles. It is never a second matrix.
#ifndef JAXSOLVE_LAYOUT_CSRC_LOCAL_TRANSPOSE_H_
#define JAXSOLVE_LAYOUT_CSRC_LOCAL_TRANSPOSE_H_

#include <algorithm>
#include <cmath>
#include <cstdint>

#if defined(__CUDACC__)
#define JAXSOLVE_HOST_DEVICE __host__ __device__
#else
#define JAXSOLVE_HOST_DEVICE
#endif

namespace jaxsolve::layout {

// Storage for complex elements: the algorithm only moves elements, so these
// plain structs (layout-compatible with std::complex and cuComplex) let the
// same code compile for host and device.
struct alignas(8) Complex64 {
  float re, im;
};
struct alignas(16) Complex128 {
  double re, im;
};

enum class Direction { kRowToColumnMajor, kColumnToRowMajor };

// The logical matrix: `rows` x `cols`, both multiples of `tile`.
struct Geometry {
  int64_t rows;
  int64_t cols;
  int64_t tile;

  JAXSOLVE_HOST_DEVICE int64_t tile_rows() const { return rows / tile; }
  JAXSOLVE_HOST_DEVICE int64_t tile_cols() const { return cols / tile; }
  JAXSOLVE_HOST_DEVICE int64_t num_tiles() const {
    return tile_rows() * tile_cols();
  }
  JAXSOLVE_HOST_DEVICE bool square() const { return rows == cols; }
  JAXSOLVE_HOST_DEVICE bool empty() const { return rows == 0 || cols == 0; }
};

// How many tiles the scratch holds for cycle following (one per chain of a
// batch).
inline int64_t CycleCapacity(const Geometry& g) {
  return std::max(g.tile_rows(), g.tile_cols());
}

// Elements of scratch `LocalTranspose` needs; `moves_tiles` says whether it
// moves tiles (all but a square matrix with the identity tile permutation).
inline int64_t ScratchElements(const Geometry& g, bool moves_tiles) {
  if (g.empty() || !moves_tiles) return 0;
  return g.tile * std::max(g.rows, g.cols);
}

//===----------------------------------------------------------------------===//
// In-place square transpose: mirrored square blocks.
//===----------------------------------------------------------------------===//

// Side of the square blocks that transposes go through: rows of at least
// 256 bytes, which HBM reads efficiently, and at most 64 x 64 elements.
template <typename T>
JAXSOLVE_HOST_DEVICE constexpr int64_t TransposeBlock() {
  return sizeof(T) >= 8 ? 32 : 64;
}

JAXSOLVE_HOST_DEVICE inline int64_t NumBlockPairs(int64_t n, int64_t block) {
  const int64_t nb = (n + block - 1) / block;
  return nb * (nb + 1) / 2;
}

// The k-th pair of mirrored blocks (bi, bj), bi <= bj, numbering the upper
// triangle column by column: k = bj * (bj + 1) / 2 + bi.
struct BlockPair {
  int64_t bi;
  int64_t bj;
};

JAXSOLVE_HOST_DEVICE inline BlockPair NthBlockPair(int64_t k) {
  int64_t bj = static_cast<int64_t>((sqrt(8.0 * static_cast<double>(k) + 1.0) -
                                     1.0) / 2.0);
  // Correct the rounding of the square root.
  while (bj * (bj + 1) / 2 > k) --bj;
  while ((bj + 1) * (bj + 2) / 2 <= k) ++bj;
  return {k - bj * (bj + 1) / 2, bj};
}

//===----------------------------------------------------------------------===//
// Runs and blocks: what CopyRuns and TransposeBlocks move.
//===----------------------------------------------------------------------===//

template <typename T>
struct Run {
  const T* src;  // nullptr: nothing to copy for this run.
  T* dst;
};

// dst[c * dst_ld + r] = src[r * src_ld + c] for r, c < size.
template <typename T>
struct Block {
  const T* src;  // nullptr: nothing to transpose for this block.
  T* dst;
  int64_t src_ld;
  int64_t dst_ld;
};

//===----------------------------------------------------------------------===//
// Panels <-> contiguous tiles (runs of T elements).
//===----------------------------------------------------------------------===//

// Strides of a panel repacking: run p = z * per_z + y (y < per_z) copies
// in + z * in_z + y * in_y to out + z * out_z + y * out_y.
struct RunStrides {
  int64_t per_z;
  int64_t in_z;
  int64_t in_y;
  int64_t out_z;
  int64_t out_y;
};

// A row-major T x C panel -> nC contiguous row-major tiles
// (run: row a of tile j; z = j, y = a).
inline RunStrides RowPanelToTiles(const Geometry& g) {
  const int64_t t = g.tile;
  return {t, /*in_z=*/t, /*in_y=*/g.cols, /*out_z=*/t * t, /*out_y=*/t};
}

// nC contiguous row-major tiles -> a row-major T x C panel.
inline RunStrides TilesToRowPanel(const Geometry& g) {
  const int64_t t = g.tile;
  return {t, /*in_z=*/t * t, /*in_y=*/t, /*out_z=*/t, /*out_y=*/g.cols};
}

// nR contiguous column-major tiles -> a column-major R x T panel
// (run: column b of tile pi; z = pi, y = b).
inline RunStrides TilesToColumnPanel(const Geometry& g) {
  const int64_t t = g.tile;
  return {t, /*in_z=*/t * t, /*in_y=*/t, /*out_z=*/t, /*out_y=*/g.rows};
}

// A column-major R x T panel -> nR contiguous column-major tiles.
inline RunStrides ColumnPanelToTiles(const Geometry& g) {
  const int64_t t = g.tile;
  return {t, /*in_z=*/t, /*in_y=*/g.rows, /*out_z=*/t * t, /*out_y=*/t};
}

template <typename T>
struct PanelRuns {
  using Element = T;
  RunStrides s;
  const T* in;
  T* out;

  JAXSOLVE_HOST_DEVICE Run<T> operator()(int64_t p) const {
    const int64_t z = p / s.per_z;
    const int64_t y = p - z * s.per_z;
    return {in + z * s.in_z + y * s.in_y, out + z * s.out_z + y * s.out_y};
  }
};

//===----------------------------------------------------------------------===//
// Tile slots and cycle following.
//===----------------------------------------------------------------------===//

// Where tile slot `s` starts: (s / per_panel) * panel_stride +
// (s % per_panel) * tile_stride; a tile is T rows of T contiguous elements,
// `ld` apart.
struct TileLayout {
  int64_t per_panel;
  int64_t panel_stride;
  int64_t tile_stride;
  int64_t ld;

  JAXSOLVE_HOST_DEVICE int64_t Base(int64_t slot) const {
    const int64_t panel = slot / per_panel;
    return panel * panel_stride + (slot - panel * per_panel) * tile_stride;
  }
};

// The tile regions of a square R x R matrix; slot i * nR + j is tile (i, j)
// of the row-major matrix.
inline TileLayout SquareTiles(const Geometry& g) {
  return {g.tile_rows(), g.tile * g.rows, g.tile, g.rows};
}

// Contiguous T x T tiles; slot s starts at s * T * T.
inline TileLayout ContiguousTiles(const Geometry& g) {
  const int64_t t2 = g.tile * g.tile;
  return {1, t2, 0, g.tile};
}

// The chains, in memory the backend's kernels can read: chain g is
// slots[offsets[g] .. offsets[g + 1]) and its last tile goes to dest[g].
struct ChainTable {
  const int32_t* slots;
  const int32_t* offsets;
  const int32_t* dest;
};

// The batches, on the host: batch b holds chains
// [batch_offsets[b], batch_offsets[b + 1]) and takes batch_rounds[b] steps
// (its longest chain).
struct CycleSchedule {
  ChainTable chains;
  const int64_t* batch_offsets;
  const int64_t* batch_rounds;
  int64_t num_batches;
};

// Step `step` of a batch: block q moves, transposed, the tile of chain
// first_chain + q from c_{n-1-step} to c_{n-step} (the scratch tile q for
// step 0).
template <typename T>
struct ChainStep {
  using Element = T;
  T* data;
  T* scratch;
  ChainTable chains;
  TileLayout layout;
  int64_t tile;
  int64_t first_chain;
  int64_t step;

  JAXSOLVE_HOST_DEVICE Block<T> operator()(int64_t q) const {
    const int64_t g = first_chain + q;
    const int64_t begin = chains.offsets[g];
    const int64_t length = chains.offsets[g + 1] - begin;
    if (step >= length) return {nullptr, nullptr, 0, 0};
    const T* src = data + layout.Base(chains.slots[begin + length - 1 - step]);
    if (step == 0) {
      return {src, scratch + q * tile * tile, layout.ld, tile};
    }
    return {src, data + layout.Base(chains.slots[begin + length - step]),
            layout.ld, layout.ld};
  }
};

// The restore of a batch: run p = q * T + row copies that row of scratch
// tile q to the slot chain first_chain + q's saved tile belongs in.
template <typename T>
struct ChainRestore {
  using Element = T;
  T* data;
  const T* scratch;
  ChainTable chains;
  TileLayout layout;
  int64_t tile;
  int64_t first_chain;

  JAXSOLVE_HOST_DEVICE Run<T> operator()(int64_t p) const {
    const int64_t q = p / tile;
    const int64_t row = p - q * tile;
    return {scratch + (q * tile + row) * tile,
            data + layout.Base(chains.dest[first_chain + q]) + row * layout.ld};
  }
};

// Moves every scheduled tile, transposed, along its cycle.
template <typename T, typename Backend>
void MoveTiles(Backend& backend, const Geometry& g, const TileLayout& layout,
               const CycleSchedule& schedule, T* data, T* scratch) {
  for (int64_t b = 0; b < schedule.num_batches; ++b) {
    const int64_t first = schedule.batch_offsets[b];
    const int64_t chains = schedule.batch_offsets[b + 1] - first;
    ChainStep<T> step{data, scratch, schedule.chains, layout, g.tile, first, 0};
    for (; step.step < schedule.batch_rounds[b]; ++step.step) {
      backend.TransposeBlocks(step, chains, g.tile);
    }
    backend.CopyRuns(ChainRestore<T>{data, scratch, schedule.chains, layout,
                                     g.tile, first},
                     chains * g.tile, g.tile);
  }
}

//===----------------------------------------------------------------------===//
// The algorithm.
//===----------------------------------------------------------------------===//

// Converts `data` (rows x cols elements) in place, in direction `direction`,
// using `scratch` of ScratchElements(g, schedule.num_batches > 0) elements.
// The schedule is empty exactly for a square matrix and the identity tile
// permutation; otherwise it moves every tile once.
template <typename T, typename Backend>
void LocalTranspose(Backend& backend, Direction direction, const Geometry& g,
                    const CycleSchedule& schedule, T* data, T* scratch) {
  if (g.empty()) return;
  if (g.square()) {
    if (schedule.num_batches == 0) {
      backend.SquareTranspose(data, g.rows);
    } else {
      MoveTiles(backend, g, SquareTiles(g), schedule, data, scratch);
    }
    return;
  }

  // Repacks each of `count` panels of `size` elements through scratch.
  auto repack = [&](int64_t count, int64_t size, int64_t runs,
                    const RunStrides& strides) {
    for (int64_t k = 0; k < count; ++k) {
      T* panel = data + k * size;
      backend.Copy(scratch, panel, size);
      backend.CopyRuns(PanelRuns<T>{strides, scratch, panel}, runs, g.tile);
    }
  };
  const int64_t row_panel = g.tile * g.cols, column_panel = g.tile * g.rows;
  const int64_t row_runs = g.tile_cols() * g.tile;
  const int64_t column_runs = g.tile_rows() * g.tile;
  if (direction == Direction::kRowToColumnMajor) {
    repack(g.tile_rows(), row_panel, row_runs, RowPanelToTiles(g));
    MoveTiles(backend, g, ContiguousTiles(g), schedule, data, scratch);
    repack(g.tile_cols(), column_panel, column_runs, TilesToColumnPanel(g));
  } else {
    repack(g.tile_cols(), column_panel, column_runs, ColumnPanelToTiles(g));
    MoveTiles(backend, g, ContiguousTiles(g), schedule, data, scratch);
    repack(g.tile_rows(), row_panel, row_runs, TilesToRowPanel(g));
  }
}

}  // namespace jaxsolve::layout

#endif  // JAXSOLVE_LAYOUT_CSRC_LOCAL_TRANSPOSE_H_
