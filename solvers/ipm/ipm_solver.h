// Copyright 2026 The contactkit developers.
//
// The interior-point solver's class (see ipm.h for the method). Internal: tests reach the
// iteration pieces through it.
#ifndef CONTACTKIT_SOLVERS_IPM_IPM_SOLVER_H_
#define CONTACTKIT_SOLVERS_IPM_IPM_SOLVER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "solvers/common/solver.h"
#include "solvers/ipm/ipm.h"
#include "solvers/ipm/island_lu.h"

namespace contactkit {
namespace ipm {

// what one group of rows is
enum UnitType : int {
  kUnitEquality = 0,  // one bilateral row
  kUnitFrictionLoss,  // one friction-loss row: a 2-d cone with a fixed bound
  kUnitLimit,         // one unilateral row: orthant pair
  kUnitContact,       // a contact: normal orthant pair and 1-3 friction cones
};

// friction cones of a contact of dimension dim: (first row offset, rows)
inline int FrictionGroups(int dim, int* first, int* count) {
  int n = 0;
  if (dim >= 3) first[n] = 1, count[n++] = 2;
  if (dim >= 4) first[n] = 3, count[n++] = 1;
  if (dim >= 6) first[n] = 4, count[n++] = 2;
  return n;
}

// an iterate, indexed by global dof and row
struct State {
  double* v;    // velocity                                                  (nv)
  double* x;    // force-side cone entries: gamma, xi_j = lambda_j / mu_j     (rows)
  double* z;    // velocity-side entries: s, eta_j = mu_j J_j v              (rows)
  double* z0;   // eta0 of the cone whose first friction row is the index    (rows)
  double* lam;  // impulse                                                   (rows)
  double* u;    // J v                                                       (rows)
  double* rz;   // row residual: z - scale J v - target, equality residual   (rows)
  double* rv;   // dynamics residual M (v - v_free) - J' lambda              (nv)
  double rvio = 0, kvio = 0, mu = 0;
  bool interior = true;  // every cone strictly inside, with a margin above rounding
};

// a search direction
struct Direction {
  double* v;    // (nv)
  double* x;    // (rows)
  double* z;    // (rows)
  double* z0;   // (rows)
  double* lam;  // (rows)
  double* u;    // J dv (rows)
};

// second-order cone entries of a friction group: x = (x0, x_R), z = (z0, z_R)
inline void GroupVectors(const State& s, int f, int cnt, double x0, double* x, double* z) {
  x[0] = x0;
  z[0] = s.z0[f];
  for (int r = 0; r < cnt; r++) {
    x[r + 1] = s.x[f + r];
    z[r + 1] = s.z[f + r];
  }
}

class IpmSolver final : public Solver {
 public:
  bool Setup(const ProblemDims& dims, const ckSettings& settings, std::string* error) override;
  void SetSettings(const ckSettings& settings) override { settings_ = settings; }
  void Solve(const Problem& p, Solution* sol) override;
  void Reset() override {}
  bool ForceTangent(const Problem& p, const Solution& sol, const ProblemTangent& dir,
                    double* dforce) override;

  const IpmInfo& info() const { return info_; }

 private:
  // per step
  void Prepare(const Problem& p);
  void SolveIsland(const Problem& p, int k, Solution* sol);
  int Attempt(const Problem& p, int k, double floor, double rtol, double ktol, int* status,
              double* cond, const State** fin);

  // per island
  void ColdStart(const Problem& p, int k, double floor, State* s);
  void Evaluate(const Problem& p, int k, State* s);
  bool ConeJacobians(const Problem& p, int k, const State& s);
  bool Linearize(const Problem& p, int k, bool coupled, double* cond);
  void Targets(const Problem& p, int k, const State& s, const Direction* aff, double kappa);
  void Constants(const Problem& p, int k, const State& s, const double* rz, const double* rv,
                 bool with_d);
  void Recover(const Problem& p, int k, const State& s, const double* rz, bool with_d,
               Direction* d);
  double MaxStep(const Problem& p, int k, const State& s, const Direction& d, double tau_ort,
                 double tau_soc) const;
  double MuAt(const Problem& p, int k, const State& s, const Direction& d, double alpha) const;
  void Step(const Problem& p, int k, const State& s, const Direction& d, double alpha,
            State* out) const;
  void Copy(const Problem& p, int k, const State& from, State* to) const;

  // island ranges
  const int* Rows(const Problem& p, int k) const { return p.islands.rows + p.islands.rowadr[k]; }
  int NumRows(const Problem& p, int k) const { return p.islands.nrows[k]; }
  const int* Dofs(const Problem& p, int k) const { return p.islands.dofs + p.islands.dofadr[k]; }
  int NumDofs(const Problem& p, int k) const { return p.islands.ndofs[k]; }

  ckSettings settings_;
  bool trace_ = false;
  ProblemDims dims_;
  IpmInfo info_;
  IslandLU lu_;

  // per row, per step
  std::vector<double> scale_;    // lambda = scale x: mu_j for friction rows, else 1    (rows)
  std::vector<double> target_;   // pos/h (unilateral), equality target                 (rows)
  std::vector<double> reg_;      // equality regularizer R                              (rows)
  std::vector<double> bound_;    // friction-loss impulse bound h floss                 (rows)
  std::vector<int> row_con_;     // contact of each row, -1                             (rows)
  std::vector<uint8_t> chain_;   // row lies on one dof chain                           (rows)

  // units (rows grouped by constraint) per island
  std::vector<int> unit_type_, unit_row_, unit_dim_;  //                               (rows)
  std::vector<int> unit_adr_, unit_num_;              //                               (ntree)
  std::vector<int> ncone_;                            // cones of each island          (ntree)

  // linearization per cone (indexed by the cone's first row): dx = d - G dz
  std::vector<double> gn_;       // orthant: x / z                                      (rows)
  std::vector<double> G_;        // second-order cone: Arw(z)^-1 Arw(x) (3 x 3)         (rows x 9)
  std::vector<double> q_;        // G_10 / G_00                                         (rows x 2)
  std::vector<double> S_;        // G_11 - q G_01                                       (rows x 4)
  std::vector<double> d_;        // z \ rc: the complementarity target's part of dx     (rows x 3)
  std::vector<double> c_;        // constant of the row impulse: dlam = c - W J dv      (rows)

  // iterates and directions
  std::vector<double> store_;    // all State and Direction arrays
  State cur_, trial_, best_, grad_;
  Direction aff_, dir_;
  std::vector<double> rhs_;      // Newton right-hand side                              (nv)
  std::vector<double> tmp_;      // scratch                                             (nv)
  std::vector<double> mdiag_;    // diagonal of M_eff                                   (nv)
  std::vector<double> jc_, tw_;  // contact rows and W-weighted rows                    (6 x nv)
  std::vector<double> out_lam_;  // final impulses                                      (rows)
  std::vector<uint8_t> grad_ok_; // island has a stored kappa_grad iterate              (ntree)
};

}  // namespace ipm
}  // namespace contactkit

#endif  // CONTACTKIT_SOLVERS_IPM_IPM_SOLVER_H_
