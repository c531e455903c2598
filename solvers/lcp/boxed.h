// Copyright 2026 The contactkit developers.
//
// Dense boxed LCP with bounds coupled to other unknowns (friction), independent of MuJoCo:
//   w = A x + b,  lo_i <= x_i <= hi_i,  x_i = lo_i => w_i >= 0,  x_i = hi_i => w_i <= 0,
//   lo_i < x_i < hi_i => w_i = 0,
// where a row with findex[i] = j >= 0 has the bounds -mu_i x_j <= x_i <= mu_i x_j (friction
// scaled by its normal force, Nimble appendix A) and the other rows constant bounds (infinite for
// bilateral rows).
//
// Everything follows from the classification of the rows (Nimble section IV): clamping rows C
// (w = 0, x free inside the bounds) and rows at their lower or upper bound (separating normals
// and sliding friction). Given a classification, x_B = E x_C + g for the bound rows and
//   (A_CC + A_CB E) x_C = -(b_C + A_CB g)                                              (K x_C = c)
// is solved with the complete orthogonal decomposition, the least-squares minimum-norm solution
// when K is rank deficient (Nimble appendix B); the answer is exact when it is complementary. The
// solver tries, in this order, until one classification is exact:
//   1. the guessed classification (the previous step's), one reduced solve (Nimble's warm start,
//      skipped on problems of at least opt.sweep_rows rows when !opt.check_guess; when its
//      minimum-norm solution fails on a rank-deficient K (a resting cloth, a quadruped's stance),
//      the same decomposition solves it again nearest to opt.start, ExactFrom, and that answer
//      is not stabilized;
//      on problems below opt.sweep_rows rows holding a friction-loss row, when it fails,
//      Dantzig's method (step 3) from the guess's answer when that lies within its bounds: the
//      rows that meet their classification stay entered and only the wrong ones are driven, a few
//      events each (opt.dantzig_first; from zero without a guess; at most n solves, 4n from zero);
//      then, or
//      on problems of at least opt.sweep_rows rows, when it fails, projected Gauss-Seidel from the
//      previous step's impulses (opt.start) whose classification, once it settles (at most 2
//      opt.sweeps sweeps), is solved exactly nearest to the iterate: the "polish"; with
//      opt.qp_sweep then the box QP of the friction bounds frozen at its iterate's normals
//      (BoxQp), refrozen until its classification is exact with the bounds coupled, and where
//      that fails Lemke's method, step 2, without the pivots that follow here), then a few
//      coupled principal pivots from it (block principal pivoting, Judice & Pires: flip every
//      infeasible row while their count falls, then Murty's single pivots; a classification seen in
//      the last 16 pivots ends the block flips, and ends the single pivots, which then cycle; at
//      most 100 reduced solves, each O(|C|^3), before the cheaper pivots of Lemke take over),
//      (with opt.lemke_warm, when the guess's reduced system is regular, Lemke's method from the
//      guess's complementary basis, step 2 warm-started, after these pivots fail (1) or before
//      them (2): its pivots grow with the rows the guess gets wrong; the others follow when it
//      fails, as it can on a ray),
//   2. Lemke's complementary pivoting on the coupled problem (lemke.h) and the exact solve of the
//      classification of its final basis,
//   3. Dantzig's principal pivoting (Baraff; boxed as in ODE) with the friction bounds frozen at
//      mu times the current normal forces, refrozen at the new normal forces until the
//      classification is exact with the bounds coupled again,
//   4. projected Gauss-Seidel, whose classification seeds step 3 once more; if nothing is exact
//      the better of the Gauss-Seidel answer and the closest exact attempt is returned, projected
//      into the bounds (after a Gauss-Seidel start, the Gauss-Seidel answer: an exact solve of a
//      wrong classification, projected, injected energy into large islands).
// Work is bounded by opt.budget (reduced solves) and opt.max_work (estimated operations: k^3/1.5
// per LU and 2 k^3 per decomposition of a k-row reduced system, 20 n^2 per Lemke pivot, 2 n^2 per
// sweep); the step that crosses the budget finishes, the fallback's sweeps get at least a tenth of
// max_work, and BoxedStats::spent says the budget ended the solve.
// An accepted answer of a problem below opt.stabilize_rows rows is stabilized: rows tied at a
// bound (w = 0) join C when the minimum-norm solution of the larger system stays exact, so that
// redundant contacts share the force symmetrically whichever path found the classification.
// Pivoting systems carry a tiny ridge (opt.ridge) so that wrong classifications of rank-deficient A
// stay solvable.
#ifndef CONTACTKIT_SOLVERS_LCP_BOXED_H_
#define CONTACTKIT_SOLVERS_LCP_BOXED_H_

#include <climits>
#include <cmath>
#include <vector>

#include "solvers/common/arena.h"
#include "solvers/common/cod.h"
#include "solvers/lcp/dense_lcp.h"
#include "solvers/lcp/lemke.h"

namespace contactkit {

// statistics of one solve
struct BoxedStats {
  int iterations = 0;      // reduced solves
  int pivots = 0;          // rows flipped
  int frozen_rounds = 0;   // rounds of Dantzig's method with frozen friction bounds
  bool guess_hit = false;  // the guessed classification was accepted
  bool pivot_ok = false;   // pivoting found an exact classification
  bool used_pgs = false;   // the Gauss-Seidel fallback ran
  double residual = 0;     // natural-map residual, velocity units
  double kappa = 0;        // largest |w_i| times the distance of x_i to its nearer bound
  double work = 0;         // estimated floating-point operations of the solve
  bool spent = false;      // the budget (solves or work) ran out before an exact answer
  bool swept = false;      // the Gauss-Seidel start of a large problem ran (sweep_rows)
  int warm_pivots = 0;     // pivots of Lemke's run from the guess's basis (in pivots)
  bool warm_hit = false;   // that warm-started run found the exact answer
  bool factored = true;    // cod holds the factorization of the final classification
  bool qp_hit = false;     // the box QP's Tresca rounds found the answer (opt.qp_sweep)
};

// options of one solve
struct BoxedOptions {
  bool use_guess = false;      // state holds a classification to check first
  bool check_guess = true;     // its exact solve is tried first (else, on problems of at least
                               // sweep_rows rows, it only seeds the Gauss-Seidel start: a guess
                               // from an answer that was not exact rarely is)
  bool factor_inexact = true;  // an answer that is not exact gets its classification factored
                               // into cod (else cod is left as it is, and stats->factored says so)
  double tol = 1e-10;          // feasibility tolerance in velocity units (w, and x scaled by A_ii)
  double ridge = 1e-12;        // relative regularization of the pivoting systems (times max A_ii)
  double rtol = 1e-13;         // relative rank threshold of the decomposition
  int max_pivots = 1000;       // flips per pivoting run
  int budget = 1 << 30;        // reduced solves and pivoting factorizations per Solve (each
                               // O(n^3)); when spent, the best answer so far is returned
  int pgs_iter = 200;          // Gauss-Seidel sweeps of the fallback
  double max_work = HUGE_VAL;  // estimated floating-point operations per Solve (factorizations
                               // k^3 / 3 (LU) or 2 k^3 (decomposition), Lemke pivots, sweeps
                               // 2 n^2); when spent, as budget: best answer, never exact
  int sweep_rows = INT_MAX;    // problems this large (rows) whose guess fails start from
                               // Gauss-Seidel on the guess's answer and an exact solve of its
                               // classification, then pivot from there
  int sweeps = 20;             // Gauss-Seidel sweeps between two classifications of that start
  int lemke_warm = 0;  // Lemke's method from the basis of a guess with a regular reduced system
                       // (below sweep_rows) before the one from scratch: 1 when the repair
                       // fails, 2 before the repair (0: never)
  bool dantzig_first = true;  // problems below sweep_rows with a friction-loss row (constant
                              // finite bounds) whose guess fails run Dantzig's method with frozen
                              // friction bounds from the guess's answer (from zero without a
                              // guess) before the repair and Lemke's method
  bool lemke_sweep = false;   // problems of at least sweep_rows rows whose Gauss-Seidel start fails
                              // run Lemke's method from its classification (its clamped rows
                              // reduced to a regular block of A) before the repair
  bool qp_sweep = false;      // problems of at least sweep_rows rows whose Gauss-Seidel start
                              // fails solve the box QP of friction bounds frozen at its normals
                              // (BoxQp) from its iterate, refrozen until exact (Tresca rounds),
                              // then, where that fails, Lemke's method without the repair
  int stabilize_rows = INT_MAX;   // answers of problems below this many rows are stabilized
                                  // (larger ones: the pile's ties joined C on 1-3% of the
                                  // tries on 3.17, 0-21% on 2.2.2, one decomposition each;
                                  // docs/solvers.md, lcp18)
  const double* start = nullptr;  // (n, nullable) where that Gauss-Seidel starts (the previous
                                  // step's impulses); else from the guess's answer
};

class BoxedLcpSolver {
 public:
  // allocate for problems up to nmax rows
  void Allocate(int nmax);
  int capacity() const { return nmax_; }

  // Solve lcp: state (n) holds the guess on entry (when opt.use_guess) and the final
  // classification on exit; x and w (n) the solution. The final reduced system is factored into
  // cod (bound to storage for at least n), unless the answer is not exact and
  // !opt.factor_inexact. Returns true if the answer is an exact complementary
  // solution within opt.tol; otherwise x is the best answer found (finite, within the bounds).
  bool Solve(const DenseLcp& lcp, const BoxedOptions& opt, signed char* state, double* x, double* w,
             Cod* cod, BoxedStats* stats);

  // reduced solve for a classification with A + ridge I: x, w (n); false if not finite. With
  // ridge > 0 (pivoting) the system is regular and solved by LU, leaving cod as it was; else cod
  // gets its complete orthogonal decomposition and x the minimum-norm solution, or with x0 (n,
  // nullable) the solution nearest to x0 on the clamped rows (x0 may alias x)
  bool Reduced(const DenseLcp& lcp, const signed char* state, double ridge, double rtol, Cod* cod,
               double* x, double* w, const double* x0 = nullptr);

  // natural-map residual max_i A_ii |x_i - clamp(x_i - w_i / A_ii, lo_i, hi_i)| (velocity
  // units) with the bounds at x; kappa (nullable) gets the complementarity measure
  static double Residual(const DenseLcp& lcp, const double* x, const double* w, double* kappa);

  // projected Gauss-Seidel from x: sweeps until the largest change (velocity units) is below tol;
  // fix (n, nullable) holds frozen friction bounds
  static int Pgs(const DenseLcp& lcp, int sweeps, double tol, double* x,
                 const double* fix = nullptr);

  // classification of an approximate solution
  static void Classify(const DenseLcp& lcp, const double* x, const double* w, double tol,
                       signed char* state);

  // cold start: bilateral and friction rows clamped, unilateral rows clamped where b_i < 0
  static void ColdState(const DenseLcp& lcp, signed char* state);

  // the clamped rows of a classification (in row order): pos (n) maps a row to its place in C
  // (-1: not clamped); returns |C|
  static int ClampedSet(const DenseLcp& lcp, const signed char* state, int* cidx, int* pos);

  // value of a bound row i with the friction bounds coupled to the normals: x_i = coef_i
  // x_(findex) + g_i, coef nonzero only if the findex row is clamped
  static void BoundValue(const DenseLcp& lcp, const signed char* state, int i, double* coef,
                         double* g);

 private:
  // value of bound row i (frozen or coupled)
  void Value(const DenseLcp& lcp, const signed char* state, int i, double* coef, double* g) const;

  // pivoting with the friction bounds frozen at mu x_normal of the current x, refrozen until the
  // classification solves the coupled problem exactly (into cod); true on success. warm: each
  // round's Dantzig run starts from x when x lies within its frozen bounds
  // With qp, each round solves the box QP of the frozen bounds (BoxQp) from x instead; its answer
  // is accepted when exact with the bounds coupled, else its classification's exact solve, else
  // a few coupled pivots from it; else the next round freezes the bounds at that exact solve's
  // normals
  bool FrozenLoop(const DenseLcp& lcp, const BoxedOptions& opt, double ridge, signed char* state,
                  Cod* cod, double* x, double* w, BoxedStats* stats, bool warm = false,
                  bool qp = false);

  // min x'Ax/2 + b'x within the bounds of fix_ (the boxed LCP with frozen friction bounds; A
  // symmetric positive semidefinite) from x (n, projected into them): projected active-set
  // steps, each a Gauss-Seidel sweep and then FaceStep on the rows it leaves inside their
  // bounds, the step to its point projected into the bounds (halved, else up to the first bound
  // it meets) only where it lowers the objective, so that no classification returns; true when
  // every row meets its classification within opt.tol, or the objective stops falling within
  // kQpStall of it (state, x, w)
  bool BoxQp(const DenseLcp& lcp, const BoxedOptions& opt, signed char* state, double* x, double* w,
             BoxedStats* stats);
  // BoxQp's step on the free rows of state from x (w = A x + b, n): a pivoted Cholesky of their
  // block of A solves its independent rows for w = 0 (the others kept), then, where the
  // dependent rows' w is left, y moves along the block's null space to the objective's minimum
  // on that line or to the first bound it meets; y (n)
  void FaceStep(const DenseLcp& lcp, const BoxedOptions& opt, const signed char* state,
                const double* x, const double* w, double* y);

  // Dantzig's principal pivoting (Baraff 1994, boxed as in ODE) for the bounds of fix_: rows
  // enter one at a time, each driven until its w vanishes or it reaches a bound, with clamped
  // rows kept at w = 0 and ratio tests moving rows between C and the bounds; x starts at 0, or
  // with warm at x as given when it lies within the bounds (DantzigStart)
  bool Dantzig(const DenseLcp& lcp, const BoxedOptions& opt, double ridge, signed char* state,
               double* x, double* w, BoxedStats* stats, bool warm = false);
  // Dantzig's warm start: false if x (n) leaves the frozen bounds; else w = A x + b and done (n)
  // marks the rows that meet their classification in state (entered: they are not driven again)
  bool DantzigStart(const DenseLcp& lcp, const BoxedOptions& opt, const signed char* state,
                    const double* x, double* w, signed char* done) const;

  // one pivoting run from state; true if it ends with no infeasible row
  bool Pivot(const DenseLcp& lcp, const BoxedOptions& opt, double ridge, signed char* state,
             double* x, double* w, BoxedStats* stats);

  // rows that violate their classification by more than tol: list (ascending) and new states
  int Infeasible(const DenseLcp& lcp, const signed char* state, const double* x, const double* w,
                 double tol, int* list, signed char* target) const;

  // (x, w) of n rows as the best answer so far if its residual res is below the best's
  void KeepBest(int n, double res, const double* x, const double* w);
  // exact solve for state into cod and acceptance test; true if residual <= tol
  bool Exact(const DenseLcp& lcp, const BoxedOptions& opt, const signed char* state, Cod* cod,
             double* x, double* w, BoxedStats* stats);

  // after a failed Exact of state on a rank-deficient reduced system: its solution nearest to x0
  // (n) on the clamped rows, by the decomposition Exact made (O(k^2), no factorization); true if
  // complementary. A resting degenerate island (more clamped rows than degrees of freedom, as
  // MuJoCo's cloth) keeps its classification from step to step, but the minimum-norm solution
  // of it can leave the bounds where the previous step's impulses are inside them
  bool ExactFrom(const DenseLcp& lcp, const BoxedOptions& opt, const signed char* state,
                 const double* x0, Cod* cod, double* x, double* w);

  // the reduced system K y = c that Reduced assembled and factored (by LU or into cod) solved
  // from x0 (n, nullable: from 0) with one step of refinement: x, w (n); false if not finite
  bool SolveKept(const DenseLcp& lcp, const signed char* state, bool lu, Cod* cod, double* x,
                 double* w, const double* x0);

  // accept x (n) as it is when its residual is within opt.tol: state becomes its classification
  // and cod the factorization of that classification (whose minimum-norm solution can differ
  // from x where the clamped rows are redundant); w gets A x + b
  bool AcceptAnswer(const DenseLcp& lcp, const BoxedOptions& opt, signed char* state, Cod* cod,
                    double* x, double* w, BoxedStats* stats);

  // Lemke's answer (x, state): the exact solve of its classification, else x itself when its
  // residual is within opt.tol (AcceptAnswer); true if one is exact
  bool LemkeAnswer(const DenseLcp& lcp, const BoxedOptions& opt, signed char* state, Cod* cod,
                   double* x, double* w, BoxedStats* stats);

  // Nimble's stabilization of an accepted solution: tied rows join C when the minimum-norm
  // solution of the larger system stays exact; cod ends with the factorization of state
  void Stabilize(const DenseLcp& lcp, const BoxedOptions& opt, signed char* state, Cod* cod,
                 double* x, double* w, BoxedStats* stats);

  // the budget ran out: opt.budget solves or opt.max_work operations
  bool Spent(const BoxedOptions& opt, const BoxedStats& st) const {
    return st.iterations >= opt.budget || work_ >= opt.max_work;
  }

  // Lemke's warm start after a failed Gauss-Seidel start: the clamped rows of state (n) whose
  // block of A is regular, the others moved to a bound (x, n: signs of friction rows; a normal's
  // x set to 0); returns the clamped rows kept. On MuJoCo 3.x patches (up to five contacts of
  // one pair at one depth) the clamped block is singular and Lemke's warm basis refused
  int RegularClamped(const DenseLcp& lcp, signed char* state, double* x);

  // large problems (opt.sweep_rows): Gauss-Seidel from x, with an exact solve of its
  // classification whenever it stops changing; true if one is exact (state, x, w, cod)
  bool SweepStart(const DenseLcp& lcp, const BoxedOptions& opt, signed char* state, Cod* cod,
                  double* x, double* w, BoxedStats* stats);

  // the exact solve of state nearest to x0 (n; on a rank-deficient system the minimum-norm one
  // can leave the bounds where the Gauss-Seidel iterate x0 is inside them) into cod, x, w; true
  // if complementary
  bool Polish(const DenseLcp& lcp, const BoxedOptions& opt, signed char* state, const double* x0,
              Cod* cod, double* x, double* w, BoxedStats* stats);

  // the fallback after pivoting: Gauss-Seidel from the best answer, its classification solved
  // exactly, then frozen rounds from it; else the best answer with its classification factored
  bool Fallback(const DenseLcp& lcp, const BoxedOptions& opt, double ridge, signed char* state,
                Cod* cod, double* x, double* w, BoxedStats* stats);

  int nmax_ = 0;
  double work_ = 0;                  // estimated operations of the current Solve
  ZeroedArray<double> K_;            // reduced matrix                                (nmax x nmax)
  ZeroedArray<double> lu_;           // its LU factors (pivoting systems)             (nmax x nmax)
  std::vector<int> piv_;             // their row interchanges                        (nmax)
  std::vector<double> c_;            // reduced right-hand side                       (nmax)
  std::vector<double> rhs_;          // ... shifted by the start x0 (SolveKept)       (nmax)
  int kept_k_ = 0;                   // order of the reduced system of the last Reduced
  std::vector<double> y_;            // reduced solution and refinement               (2 nmax)
  std::vector<double> xb_;           // best answer so far                            (nmax)
  std::vector<double> wb_;           // its w                                         (nmax)
  std::vector<double> fixv_;         // frozen friction bounds                        (nmax)
  const double* fix_ = nullptr;      // fixv_ while the bounds are frozen, else null
  std::vector<double> xs_;           // scratch answer                                (nmax)
  std::vector<double> xl_;           // Lemke's own answer                            (nmax)
  std::vector<double> xg_;           // Gauss-Seidel iterate of SweepStart and Fallback (nmax)
  std::vector<double> ws_;           // its w                                         (nmax)
  double best_res_ = 0;              // residual of xb_
  std::vector<int> cidx_;            // clamped rows                                  (nmax)
  std::vector<int> pos_;             // place of each row in C                        (nmax)
  std::vector<int> list_;            // infeasible rows                               (nmax)
  std::vector<signed char> target_;  // their new states                         (nmax)
  std::vector<signed char> s2_;      // scratch classification                   (nmax)
  std::vector<signed char> sw_;      // Lemke's warm start: the guess's classification (nmax)
  std::vector<double> xw_;           // ... and its impulses                          (nmax)
  std::vector<signed char> sd_;      // Dantzig's warm start: the guess's classification (nmax)
  std::vector<double> xd_;           // ... and its answer                            (nmax)
  std::vector<double> xt_;           // BoxQp's trial point, then its answer          (nmax)
  std::vector<double> wt_;           // its w                                         (nmax)
  ZeroedArray<double> coddmem_;      // scratch decomposition for pivoting            (Cod::Doubles)
  std::vector<int> codimem_;
  Cod cod_;      // decomposition of the pivoting systems
  Lemke lemke_;  // complementary pivoting on the coupled problem
};

}  // namespace contactkit

#endif  // CONTACTKIT_SOLVERS_LCP_BOXED_H_
