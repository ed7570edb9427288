// Work split over the machine's cores by contiguous blocks of rows, shared by
// the host setup kernels and the CPU FFI handlers. Threads are started per
// call, so callers ask for several blocks only when the work pays for them.
#ifndef JAXSOLVE_SPARSE_CSRC_ROW_BLOCKS_H_
#define JAXSOLVE_SPARSE_CSRC_ROW_BLOCKS_H_

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

namespace jaxsolve::sparse {

// How many blocks `work` units make, at least `min_work` each and at most one
// per core.
inline int64_t BlocksFor(int64_t work, int64_t min_work) {
  const int64_t cores =
      std::max<int64_t>(1, std::thread::hardware_concurrency());
  return std::clamp<int64_t>(work / std::max<int64_t>(min_work, 1), 1, cores);
}

// Calls body(b, begin, end) for the `blocks` contiguous blocks b of [0, n),
// each on a thread of its own (the last in the calling thread); false if a
// call threw.
template <typename Body>
bool ForNumberedBlocks(int64_t n, int64_t blocks, Body body) {
  std::atomic<bool> failed{false};
  const auto run = [&](int64_t b) {
    try {
      body(b, n * b / blocks, n * (b + 1) / blocks);
    } catch (...) {
      failed = true;
    }
  };
  std::vector<std::thread> threads;
  for (int64_t b = 0; b + 1 < blocks; ++b) threads.emplace_back(run, b);
  run(blocks - 1);
  for (std::thread& thread : threads) thread.join();
  return !failed;
}

// Calls body(begin, end) on the blocks of ForNumberedBlocks.
template <typename Body>
bool ForRowBlocks(int64_t n, int64_t blocks, Body body) {
  return ForNumberedBlocks(
      n, blocks, [&](int64_t, int64_t begin, int64_t end) { body(begin, end); });
}

}  // namespace jaxsolve::sparse

#endif  // JAXSOLVE_SPARSE_CSRC_ROW_BLOCKS_H_
