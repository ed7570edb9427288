// Work split over the machine's cores by contiguous blocks of rows, shared by
// the host setup kernels and the CPU FFI handlers. The blocks run on the
// process's host threads (host_threads.cc), which are started once; a block
// still costs a wake-up and a share of the caller's memory traffic, so callers
// ask for several only when the work pays for them.
#ifndef JAXSOLVE_SPARSE_CSRC_ROW_BLOCKS_H_
#define JAXSOLVE_SPARSE_CSRC_ROW_BLOCKS_H_

#include <sched.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <fstream>
#include <string>
#include <thread>

namespace jaxsolve::sparse {

// The cores this process may use, found once: the CPUs of its affinity mask
// (a container's cpuset), at most its cgroup's CPU quota rounded up (cgroup
// v2 cpu.max, as `docker --cpus` sets it). std::thread::hardware_concurrency
// counts every CPU of the host instead, which in a container of 16 cores on a
// host of hundreds started hundreds of threads per call, each with its own
// marker tables, to share 16 cores.
inline int64_t Cores() {
  static const int64_t cores = [] {
    int64_t count = std::thread::hardware_concurrency();
    cpu_set_t mask;
    if (sched_getaffinity(0, sizeof(mask), &mask) == 0) count = CPU_COUNT(&mask);
    std::ifstream cpu_max("/sys/fs/cgroup/cpu.max");
    std::string quota;
    int64_t period = 0;
    if (cpu_max >> quota >> period && quota != "max" && period > 0) {
      try {
        count = std::min<int64_t>(count, (std::stoll(quota) + period - 1) / period);
      } catch (...) {  // not a number: no quota we understand
      }
    }
    return std::max<int64_t>(count, 1);
  }();
  return cores;
}

// How many blocks `work` units make, at least `min_work` each and at most one
// per core.
inline int64_t BlocksFor(int64_t work, int64_t min_work) {
  return std::clamp<int64_t>(work / std::max<int64_t>(min_work, 1), 1, Cores());
}

// Runs task(context, b) for each b in [0, count) on the host threads: a pool
// of Cores() - 1 threads started on first use and kept for the process's life
// (a forked child starts its own), the calling thread running its share.
// Returns when every call has returned; a task may itself call
// RunOnHostThreads, and must not throw.
void RunOnHostThreads(int64_t count, void (*task)(void*, int64_t), void* context);

// Calls body(b, begin, end) for the `blocks` contiguous blocks b of [0, n),
// over the host threads; false if a call threw.
template <typename Body>
bool ForNumberedBlocks(int64_t n, int64_t blocks, Body body) {
  std::atomic<bool> failed{false};
  auto run = [&](int64_t b) {
    try {
      body(b, n * b / blocks, n * (b + 1) / blocks);
    } catch (...) {
      failed = true;
    }
  };
  RunOnHostThreads(
      blocks, [](void* f, int64_t b) { (*static_cast<decltype(run)*>(f))(b); }, &run);
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
