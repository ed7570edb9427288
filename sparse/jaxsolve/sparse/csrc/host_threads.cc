// The process's host threads (row_blocks.h's RunOnHostThreads), and how many
// the host kernels of libjaxsolve_sparse.so split their work over, at most
// (Cores): a C function for jaxsolve/sparse/_native_library.py's host_threads, which
// the benchmarks print next to the setup's times.
//
// A classical setup runs some 150 parallel loops; starting Cores() - 1
// threads for each cost more than some of the loops themselves on a machine
// of many cores (the H200 host's 16: 3D Poisson 128^3's host structure took
// 0.88-0.97 s with threads started per loop, 0.83-0.90 s with the pool, and
// page-faulted half as much memory, the pool's threads keeping their heaps).
// The pool's threads wait on a condition variable between jobs. A job's tasks
// are claimed by index, by its caller first and by any idle pool thread, so a
// caller never waits on a task nobody runs: it runs them all itself when the
// pool is busy, and a task that starts a job of its own (on a pool thread)
// cannot deadlock the pool.
#include <pthread.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <system_error>
#include <thread>

#include "export.h"
#include "row_blocks.h"

namespace jaxsolve::sparse {
namespace {

// One call of RunOnHostThreads.
struct Job {
  void (*task)(void*, int64_t);
  void* context;
  int64_t count;
  std::atomic<int64_t> next{0};  // the first task not yet claimed
  std::atomic<int64_t> unfinished;
  int64_t helpers = 0;  // pool threads inside Claim (under the pool's mutex)

  // Runs tasks until none is left to claim.
  void Claim() {
    for (int64_t b; (b = next.fetch_add(1)) < count;) {
      task(context, b);
      unfinished.fetch_sub(1);
    }
  }
};

class Pool {
 public:
  // Starts up to `threads` threads: as many as the system grants (a caller
  // runs whatever no thread claims).
  explicit Pool(int64_t threads) {
    try {
      for (; threads_ < threads; ++threads_) std::thread([this] { Serve(); }).detach();
    } catch (const std::system_error&) {
    }
  }

  void Run(Job& job) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      jobs_.push_back(&job);
    }
    for (int64_t t = 1; t < job.count && t <= threads_; ++t) wake_.notify_one();
    job.Claim();
    std::unique_lock<std::mutex> lock(mutex_);
    for (auto it = jobs_.begin(); it != jobs_.end(); ++it) {  // no thread may join it now
      if (*it == &job) {
        jobs_.erase(it);
        break;
      }
    }
    done_.wait(lock, [&] { return job.unfinished == 0 && job.helpers == 0; });
  }

 private:
  void Serve() {
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
      wake_.wait(lock, [&] { return !jobs_.empty(); });
      Job& job = *jobs_.front();
      if (job.next >= job.count) {  // every task claimed: its caller waits for the rest
        jobs_.pop_front();
        continue;
      }
      ++job.helpers;
      lock.unlock();
      job.Claim();
      lock.lock();
      // The job lives while helpers > 0; its caller rechecks under the mutex.
      if (--job.helpers == 0 && job.unfinished == 0) done_.notify_all();
    }
  }

  int64_t threads_ = 0;
  std::mutex mutex_;
  std::condition_variable wake_, done_;
  std::deque<Job*> jobs_;  // jobs with tasks maybe left to claim, oldest first
};

// The pool, made on first use. A forked child has only the thread that
// forked: it forgets the parent's pool (leaked, its mutex perhaps held) and
// makes its own.
std::mutex pool_mutex;
Pool* pool = nullptr;

Pool& HostPool() {
  static const bool registered = [] {
    pthread_atfork([] { pool_mutex.lock(); }, [] { pool_mutex.unlock(); },
                   [] {  // in the child, by the thread that forked and holds the lock
                     pool = nullptr;
                     pool_mutex.unlock();
                   });
    return true;
  }();
  (void)registered;
  std::lock_guard<std::mutex> lock(pool_mutex);
  if (pool == nullptr) pool = new Pool(Cores() - 1);
  return *pool;
}

}  // namespace

void RunOnHostThreads(int64_t count, void (*task)(void*, int64_t), void* context) {
  Job job{task, context, count};
  job.unfinished = count;
  if (count <= 1 || Cores() == 1) {
    job.Claim();
    return;
  }
  HostPool().Run(job);
}

}  // namespace jaxsolve::sparse

JAXSOLVE_SPARSE_EXPORT int32_t JaxsolveSparseHostThreads() {
  return static_cast<int32_t>(::jaxsolve::sparse::Cores());
}
