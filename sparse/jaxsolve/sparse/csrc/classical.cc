// The host structure of classical (Ruge-Stuben) AMG: C/F splittings of the
// strength graph, and the index plan of an interpolation on it. C functions
// of libjaxsolve_sparse.so, called through ctypes on NumPy arrays by
// jaxsolve/sparse/_native.py, which checks them.
//
// S is the n x n strength graph in CSR: row i lists the j that i strongly
// depends on (j != i). Its transpose S^T lists, for each i, the points that
// depend on i; G = S + S^T is the undirected graph of strong couplings.
//
//   JaxsolveSparseClassicalSplitting, method 0 (PMIS): the maximal independent
//     set of G that a greedy pass in decreasing weight w_i = |S^T_i| + u_i
//     takes (u_i in [0, 1), a fixed hash of i): the set that the rounds of
//     De Sterck, Yang and Heys' parallel PMIS reach with these weights. Its
//     points are C, every other point F; a point without strong couplings is
//     F (no interpolation: its row is smoothed only).
//   Method 1 (HMIS on one process, where no processor boundaries are left
//     for its PMIS part): Ruge-Stuben's first pass. The undecided point of
//     largest lambda_i = |S^T_i ∩ U| + 2 |S^T_i ∩ F| becomes C, the undecided
//     points that depend on it F, and the lambdas are updated; ties go to the
//     smallest index. Every F point with a strong dependency depends on a C
//     point.
//   JaxsolveSparseInterpolationPlan: for a splitting, the pattern of the
//     interpolation P and where each value of A enters its weights (see
//     InterpolationPlan below); D1 (Ruge-Stuben's modified classical
//     interpolation) or D2 (extended+i, De Sterck, Falgout, Nolting and Yang
//     2008).
//
// O(n log n + nnz(S)) for the splittings; the plan is O(sum over F points of
// the entries of their strong F neighbours' rows).
#include <algorithm>
#include <cstdint>
#include <memory>
#include <new>
#include <queue>
#include <utility>
#include <vector>

#include "export.h"

namespace {

constexpr int32_t kUndecided = -1;
constexpr int32_t kFine = 0;
constexpr int32_t kCoarse = 1;

// A fixed pseudo-random number in [0, 1) for node i (splitmix64).
double Unit(uint64_t i) {
  uint64_t z = i + 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return static_cast<double>(z >> 11) * (1.0 / 9007199254740992.0);
}

// The transpose of the n x n pattern (indptr, indices).
void Transpose(int32_t n, const int32_t* indptr, const int32_t* indices,
               std::vector<int64_t>& t_indptr, std::vector<int32_t>& t_indices) {
  t_indptr.assign(static_cast<size_t>(n) + 1, 0);
  for (int64_t e = 0; e < indptr[n]; ++e) ++t_indptr[indices[e] + 1];
  for (int32_t i = 0; i < n; ++i) t_indptr[i + 1] += t_indptr[i];
  t_indices.resize(indptr[n]);
  std::vector<int64_t> next(t_indptr.begin(), t_indptr.end() - 1);
  for (int32_t i = 0; i < n; ++i) {
    for (int32_t e = indptr[i]; e < indptr[i + 1]; ++e) {
      t_indices[next[indices[e]]++] = i;
    }
  }
}

void Pmis(int32_t n, const int32_t* indptr, const int32_t* indices,
          const std::vector<int64_t>& t_indptr,
          const std::vector<int32_t>& t_indices, int32_t* state) {
  std::vector<double> weight(n);
  std::vector<int32_t> order(n);
  for (int32_t i = 0; i < n; ++i) {
    weight[i] = static_cast<double>(t_indptr[i + 1] - t_indptr[i]) + Unit(i);
    order[i] = i;
  }
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return weight[a] > weight[b] || (weight[a] == weight[b] && a < b);
  });
  for (int32_t i : order) {
    if (state[i] != kUndecided) continue;
    state[i] = kCoarse;
    for (int32_t e = indptr[i]; e < indptr[i + 1]; ++e) {
      if (state[indices[e]] == kUndecided) state[indices[e]] = kFine;
    }
    for (int64_t e = t_indptr[i]; e < t_indptr[i + 1]; ++e) {
      if (state[t_indices[e]] == kUndecided) state[t_indices[e]] = kFine;
    }
  }
}

void RugeStubenFirstPass(int32_t n, const int32_t* indptr, const int32_t* indices,
                         const std::vector<int64_t>& t_indptr,
                         const std::vector<int32_t>& t_indices, int32_t* state) {
  std::vector<int64_t> lambda(n);
  // Largest lambda first, then smallest index; stale entries are skipped.
  std::priority_queue<std::pair<int64_t, int32_t>> queue;
  for (int32_t i = 0; i < n; ++i) {
    if (state[i] != kUndecided) continue;
    lambda[i] = t_indptr[i + 1] - t_indptr[i];
    queue.emplace(lambda[i], -i);
  }
  const auto change = [&](int32_t k, int64_t by) {
    if (state[k] != kUndecided) return;
    lambda[k] += by;
    queue.emplace(lambda[k], -k);
  };
  while (!queue.empty()) {
    const auto [priority, negative] = queue.top();
    queue.pop();
    const int32_t i = -negative;
    if (state[i] != kUndecided || priority != lambda[i]) continue;
    state[i] = kCoarse;
    for (int64_t e = t_indptr[i]; e < t_indptr[i + 1]; ++e) {
      const int32_t j = t_indices[e];  // j depends on i
      if (state[j] != kUndecided) continue;
      state[j] = kFine;
      for (int32_t f = indptr[j]; f < indptr[j + 1]; ++f) change(indices[f], 1);
    }
    for (int32_t e = indptr[i]; e < indptr[i + 1]; ++e) change(indices[e], -1);
  }
}

// Where the values of A enter the interpolation weights of P (n x n_coarse).
// For an F point i, with C_i (its interpolatory C points: P's columns in row
// i) and F_i (its strong F neighbours whose couplings are distributed):
//
//   w_ij = -(a_ij + sum_{k in F_i} a_ik abar_kj / s_ik) / d_i,  j in C_i
//   s_ik = sum_{l in C_i (+ i for D2)} abar_kl
//   d_i  = sum of the other entries of row i (the diagonal, weak couplings not
//          in C_i, and for D1 strong F couplings without a common C point)
//          + (D2) sum_{k in F_i} a_ik abar_ki / s_ik
//
// with abar_kl = a_kl where its sign is opposite to a_kk's, else 0. Encoded:
//   a_destination[e]: where entry e of A adds: P position (>= 0), -2 - i for
//     row i's d_i, -1 for nowhere (C rows, distributed couplings);
//   pair_positions[q]: the entry a_ik of the q-th distributed coupling;
//     pair_counts[q]: its number of triples;
//   triple_entries[t], triple_destinations[t]: the entry a_kl of row k and
//     where abar_kl · a_ik / s_ik adds (encoded as a_destination).
struct InterpolationPlan {
  std::vector<int32_t> p_indptr, p_indices, a_destination, pair_positions,
      pair_counts, triple_entries, triple_destinations;
};

void BuildPlan(int32_t n, const int32_t* indptr, const int32_t* indices,
               const uint8_t* strong, const int32_t* coarse_index,
               bool distance_two, InterpolationPlan& plan) {
  plan.p_indptr.assign(static_cast<size_t>(n) + 1, 0);
  plan.a_destination.assign(indptr[n], -1);
  // position[j]: j's position in the row of P being built (-1: not in it);
  // common[j]: the row i for which j is a strong C point of i.
  std::vector<int32_t> position(n, -1), common(n, -1), columns;
  std::vector<int32_t> pairs;
  for (int32_t i = 0; i < n; ++i) {
    const int32_t begin = static_cast<int32_t>(plan.p_indices.size());
    if (coarse_index[i] >= 0) {
      plan.p_indices.push_back(coarse_index[i]);
      plan.p_indptr[i + 1] = begin + 1;
      continue;
    }
    columns.clear();
    pairs.clear();
    for (int32_t e = indptr[i]; e < indptr[i + 1]; ++e) {
      const int32_t j = indices[e];
      if (j != i && strong[e] && coarse_index[j] >= 0) {
        columns.push_back(j);
        common[j] = i;
      }
    }
    for (int32_t e = indptr[i]; e < indptr[i + 1]; ++e) {
      const int32_t k = indices[e];
      if (k == i || !strong[e] || coarse_index[k] >= 0) continue;
      bool distributed = distance_two;
      for (int32_t f = indptr[k]; f < indptr[k + 1]; ++f) {
        const int32_t l = indices[f];
        if (!strong[f] || coarse_index[l] < 0 || l == k) continue;
        if (distance_two) {
          columns.push_back(l);
        } else if (common[l] == i) {
          distributed = true;
        }
      }
      if (distributed) pairs.push_back(e);
    }
    std::sort(columns.begin(), columns.end());
    columns.erase(std::unique(columns.begin(), columns.end()), columns.end());
    for (size_t c = 0; c < columns.size(); ++c) {
      position[columns[c]] = begin + static_cast<int32_t>(c);
      plan.p_indices.push_back(coarse_index[columns[c]]);
    }
    plan.p_indptr[i + 1] = static_cast<int32_t>(plan.p_indices.size());
    for (int32_t e = indptr[i]; e < indptr[i + 1]; ++e) {
      const int32_t j = indices[e];
      plan.a_destination[e] = j != i && position[j] >= 0 ? position[j] : -2 - i;
    }
    for (int32_t e : pairs) {
      plan.a_destination[e] = -1;
      const int32_t k = indices[e];
      int32_t count = 0;
      for (int32_t f = indptr[k]; f < indptr[k + 1]; ++f) {
        const int32_t l = indices[f];
        const int32_t destination =
            l == i ? (distance_two ? -2 - i : -1) : position[l];
        if (destination == -1) continue;
        plan.triple_entries.push_back(f);
        plan.triple_destinations.push_back(destination);
        ++count;
      }
      plan.pair_positions.push_back(e);
      plan.pair_counts.push_back(count);
    }
    for (int32_t j : columns) position[j] = -1;
  }
}

}  // namespace

// Writes kCoarse (1) or kFine (0) to coarse[0..n) and returns the number of C
// points; -1 if memory ran out.
JAXSOLVE_SPARSE_EXPORT int32_t JaxsolveSparseClassicalSplitting(
    int32_t n, const int32_t* indptr, const int32_t* indices, int32_t method,
    int32_t* coarse) {
  try {
    std::vector<int64_t> t_indptr;
    std::vector<int32_t> t_indices;
    Transpose(n, indptr, indices, t_indptr, t_indices);
    for (int32_t i = 0; i < n; ++i) {
      const bool coupled = indptr[i + 1] > indptr[i] || t_indptr[i + 1] > t_indptr[i];
      coarse[i] = coupled ? kUndecided : kFine;
    }
    if (method == 0) {
      Pmis(n, indptr, indices, t_indptr, t_indices, coarse);
    } else {
      RugeStubenFirstPass(n, indptr, indices, t_indptr, t_indices, coarse);
    }
    return static_cast<int32_t>(std::count(coarse, coarse + n, kCoarse));
  } catch (const std::bad_alloc&) {
    return -1;
  }
}

// Builds the plan for the n x n matrix pattern (indptr, indices) with strong
// entries marked, coarse_index[i] the coarse unknown of a C point (-1 for F);
// returns it (to be read with ...Sizes and ...Copy, then freed), or null if
// memory ran out.
JAXSOLVE_SPARSE_EXPORT void* JaxsolveSparseInterpolationPlan(
    int32_t n, const int32_t* indptr, const int32_t* indices, const uint8_t* strong,
    const int32_t* coarse_index, int32_t distance_two) {
  try {
    auto plan = std::make_unique<InterpolationPlan>();
    BuildPlan(n, indptr, indices, strong, coarse_index, distance_two != 0, *plan);
    return plan.release();
  } catch (const std::bad_alloc&) {
    return nullptr;
  }
}

// The lengths of the plan's seven arrays, in the order of InterpolationPlan.
JAXSOLVE_SPARSE_EXPORT void JaxsolveSparseInterpolationSizes(const void* handle,
                                                            int64_t* sizes) {
  const auto& plan = *static_cast<const InterpolationPlan*>(handle);
  const std::vector<int32_t>* arrays[] = {
      &plan.p_indptr, &plan.p_indices, &plan.a_destination, &plan.pair_positions,
      &plan.pair_counts, &plan.triple_entries, &plan.triple_destinations};
  for (int a = 0; a < 7; ++a) sizes[a] = static_cast<int64_t>(arrays[a]->size());
}

// Copies the plan's arrays into the caller's, sized as ...Sizes says, and
// frees the plan.
JAXSOLVE_SPARSE_EXPORT void JaxsolveSparseInterpolationCopy(
    void* handle, int32_t* p_indptr, int32_t* p_indices, int32_t* a_destination,
    int32_t* pair_positions, int32_t* pair_counts, int32_t* triple_entries,
    int32_t* triple_destinations) {
  std::unique_ptr<InterpolationPlan> plan(static_cast<InterpolationPlan*>(handle));
  const std::pair<const std::vector<int32_t>*, int32_t*> copies[] = {
      {&plan->p_indptr, p_indptr},          {&plan->p_indices, p_indices},
      {&plan->a_destination, a_destination}, {&plan->pair_positions, pair_positions},
      {&plan->pair_counts, pair_counts},    {&plan->triple_entries, triple_entries},
      {&plan->triple_destinations, triple_destinations}};
  for (const auto& [from, to] : copies) std::copy(from->begin(), from->end(), to);
}
