// Copyright 2026 The contactkit developers.
//
// Which islands a perturbation of the problem data reaches: most directions of a step's
// derivative move one kinematic tree, so that a solver's force tangent can skip every island
// whose equations the direction leaves alone (their tangent is zero).
#ifndef CONTACTKIT_SOLVERS_COMMON_REACH_H_
#define CONTACTKIT_SOLVERS_COMMON_REACH_H_

#include <cstdint>
#include <cstring>

#include "solvers/common/problem.h"

namespace contactkit {

// calls f(i) for each nonzero x[i], i in [0, n): blocks of 32 entries are tested first by or-ing
// their bits without the sign (-0 is zero), a loop without branches
template <class F>
void ForNonzero(const double* x, int n, F f) {
  constexpr int kBlock = 32;
  int i = 0;
  for (; i + kBlock <= n; i += kBlock) {
    uint64_t any = 0;
    for (int b = 0; b < kBlock; b++) {
      uint64_t bits;
      std::memcpy(&bits, x + i + b, sizeof(bits));
      any |= bits << 1;
    }
    if (!any) continue;
    for (int b = 0; b < kBlock; b++) {
      if (x[i + b] != 0) f(i + b);
    }
  }
  for (; i < n; i++) {
    if (x[i] != 0) f(i);
  }
}

class IslandReach {
 public:
  // the storage order of p's M and J (once per problem)
  void Prepare(const Problem& p);
  // touched[k] = 1 for each island k (p.islands.nisland) whose data dir perturbs (v_free, M on
  // its trees; J, pos, vel, R, aref, disp on its rows), 0 for the others; with one island it is
  // marked without a look (a superset: nothing to skip)
  void Mark(const Problem& p, const ProblemTangent& dir, uint8_t* touched) const;

 private:
  bool m_ordered_ = false;  // M's rows stored one after another in dof order
  bool j_ordered_ = false;  // J's rows stored one after another in row order
};

}  // namespace contactkit

#endif  // CONTACTKIT_SOLVERS_COMMON_REACH_H_
