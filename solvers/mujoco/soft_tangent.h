// Copyright 2026 The contactkit developers.
//
// Derivatives of MuJoCo's own soft-constraint solver (the "mujoco" pass-through), which MuJoCo
// does not provide. At the solution of MuJoCo's reduced primal problem (Computation chapter,
// "Constraint solver")
//
//   min_a  1/2 (a - a0)' M (a - a0) + s(J a - aref),   f = -grad s(J a - aref),
//
// the optimality condition M (a - a0) = J' f holds, with s piecewise quadratic: rows in the
// quadratic zone contribute f = -D jar (D = 1/R), satisfied rows and friction loss at its bound
// nothing, and elliptic contacts in the middle zone f = -grad 1/2 Dm (N - mu T)^2. Differentiating
// it (implicit function theorem) gives the Newton Hessian H = M + J' D J on the active rows plus
// the cone Hessians, factored once per solution and reused for every direction.
//
// Works on MuJoCo's own rows (pyramid edges J_n +- mu_j J_j for pyramidal contacts) with the
// states, forces and R that MuJoCo's solver left in efc_*, and on a Problem whose contact rows are
// in their frames (the edges are linear combinations of the frame rows). Independent of MuJoCo's
// types: the bridge passes those arrays in.
#ifndef CONTACTKIT_SOLVERS_MUJOCO_SOFT_TANGENT_H_
#define CONTACTKIT_SOLVERS_MUJOCO_SOFT_TANGENT_H_

#include <vector>

#include "solvers/common/problem.h"

namespace contactkit {

// constraint states, numbered as MuJoCo's mjtConstraintState
enum SoftState : int {
  kSoftSatisfied = 0,  // no force
  kSoftQuadratic,      // f = -D jar
  kSoftLinearNeg,      // friction loss at +floss
  kSoftLinearPos,      // friction loss at -floss
  kSoftCone,           // elliptic contact in the middle zone
};

// what MuJoCo's solver left for its own rows (efc rows: the problem's non-contact rows one to
// one, then each contact from its efc_address: dim rows, or 2 (dim-1) pyramid edges)
struct SoftRows {
  bool elliptic = false;          // the model's cone
  int nrow = 0;                   // MuJoCo's rows (nefc)
  const int* state = nullptr;     // SoftState of each row                        (nrow)
  const double* force = nullptr;  // efc_force                                    (nrow)
  const double* R = nullptr;      // efc_R                                        (nrow)
  const double* mu = nullptr;     // regularized cone friction of each problem contact (ncon)
  const int* group = nullptr;     // SharedRowGroups of the problem (the caller's)  (problem rows)
};

// group[i] of frame row i: the rows [i, i + group[i]) share row i's columns and follow each other
// in i's island's row list (a contact's rows from the extractor), 1 for a row alone, 0 for a
// group's other rows (rows outside the islands: 1)                                     (nrow)
void SharedRowGroups(const Problem& p, int* group);

// y += V' x over the rows rows[0..n) (an island's, ascending), V with J's sparsity (J.val, dJ):
// a group of rows that share their columns in one pass (each column's sum in the rows' order, as
// row by row; a row with x = 0 adds zeros), a group whose x are all zero skipped
void AddRowsT(const SparseRows& J, const double* V, const double* x, const int* rows, int n,
              const int* group, double* y);

class SoftTangent {
 public:
  // allocate for every problem that fits in dims
  void Setup(const ProblemDims& dims);
  // test hook: VelocityRows forms a contact's symmetric J_c' W S J_c (S the same on its rows)
  // once per pair of columns (true) or whole
  static inline bool symmetric_velocity_rows_ = true;

  // Build and factor the Hessian at the solution v+ = v_next of problem p, whose mass matrix
  // (p.mass, factored) is the one MuJoCo's solver used. False if a Hessian block is not
  // positive definite or the rows do not fit.
  bool Prepare(const Problem& p, const SoftRows& rows, const double* v_next);

  // Complementarity-aware tangents (the meaning of Solver::SetTangentModes) from the next
  // Prepare on: mode[c] = 0 releases contact c (its rows leave the active set: force held
  // fixed), 1 keeps a contact with no active row in the quadratic zone (every row), -1 as
  // solved; null: MuJoCo's own states. The caller keeps mode (ncon) alive until that Prepare.
  void SetModes(const signed char* mode) { mode_ = mode; }
  // the last Prepare's modes changed a contact's states (mode 0 on one with an active row, 1 on
  // one without): the caller keeps this tangent rather than choose by Nimble's score, which the
  // solved tangent inflates (MuJoCo's reference acceleration -k r ties velocity to depth)
  bool modes_changed() const { return modes_changed_; }

  // Force tangent in the problem's (frame) rows along dir; dv_next (nv, nullable) receives the
  // tangent of the solver's v+. Must follow Prepare on the same problem. No allocation.
  void ForceTangent(const Problem& p, const ProblemTangent& dir, double* dforce, double* dv_next);

  // Blocked form for many directions at once. The solution's tangent solves H dv+ = rhs with
  //   rhs = M dv_free - dM (v+ - v_free) + h dJ' f + J_E' (Phi t - h f rho);
  // RowRhs adds the last term for the row tangents of dir (J, vel, aref, R), and SolveBlock
  // applies H^-1 to nb columns stored row-major (x[i * nb + c], i < nv, nb <= kBlock).
  static constexpr int kBlock = 32;
  // dJv (nrow, nullable) is dir.J v+ if the caller has it already; island >= 0: dir reaches the
  // rows of that island only (a direction of one tree), so only they are visited
  void RowRhs(const Problem& p, const ProblemTangent& dir, double* rhs, const double* dJv = nullptr,
              int island = -1);
  // RowRhs' coefficients on the rows of island (J' fold the term it adds) into fold (nrow;
  // zero on the other rows)
  void IslandRowFold(const Problem& p, const ProblemTangent& dir, const double* dJv, int island,
                     double* fold);
  // J' F of island's rows for ns slots at once (F slot-major, ldf apart; X row-major, ldx): each
  // slot's entries the sums RowRhs adds with the coefficients of IslandRowFold
  void IslandFoldBlock(const Problem& p, int island, const double* F, size_t ldf, int ns, double* X,
                       int ldx) const;
  void SolveBlock(const Problem& p, double* x, int nb);
  // RowRhs of velocity direction e_k alone (dir.vel = J e_k, dir.aref = -B dir.vel, no J, R or
  // position terms): column k of J' W S J with W the rows' curvature (AddCurvature's) and
  // S = diag(1 - h B), added to rhs on k's island; formed per island at the first call after
  // Prepare (the same terms as RowRhs, summed in another order)
  void VelocityRowRhs(const Problem& p, int k, double* rhs);
  // RowRhs transposed: for y = J mu (nrow), mu' RowRhs(dir) = sum_i tau_i t_i + sigma_i rho_i
  // over the frame rows, t = dJ v+ - dir.vel - h dir.aref and rho_i = dir.R_i / R_i of a row
  // group's first row (sigma zero on a contact's other rows); tau, sigma (nrow). One reverse-mode
  // call (Derivative::AdjointDirections) for every direction's row term
  void RowAdjoint(const Problem& p, const double* y, double* tau, double* sigma);

  // MuJoCo rows in the last Prepare
  int nrow() const { return nrow_; }

 private:
  // Prepare's parts: MuJoCo's rows as combinations of frame rows, with their states, forces and
  // the cone Hessians at v_next; the dense mass matrix of each island; the curvature J' W J of
  // the active rows added to it (lower triangle)
  void MapRows(const Problem& p, const SoftRows& rows, const double* v_next);
  void MassBlocks(const Problem& p);
  void AddCurvature(const Problem& p, const SoftRows& rows);
  // W of contact c in its frame rows (dim x dim, row-major, zeroed by the caller): its quadratic
  // rows, pyramid edges and cone Hessian; false if none of its MuJoCo rows is active
  bool ContactCurvature(const Problem& p, int c, double W[36]) const;
  // VelocityRowRhs' J' W S J of every island into K_
  void VelocityRows(const Problem& p);

  // the modes' states over MuJoCo's own (st_)
  void ApplyModes(const Problem& p);
  // t, rho of the frame rows and g = Phi t - h f rho of MuJoCo's rows (in ge_) for dir
  void RowTerms(const Problem& p, const ProblemTangent& dir, const double* dJv);
  // J_e x for MuJoCo row e
  double RowDot(const Problem& p, int e, const double* x) const;
  // RowRhs on the n frame rows rows[0..n) (an island's): their t, rho, their MuJoCo rows' g and
  // J_e' g added to rhs (null: not); the coefficients in fold (nrow; null: fold_)
  void IslandRowRhs(const Problem& p, const ProblemTangent& dir, const double* dJv, const int* rows,
                    int n, double* rhs, double* fold = nullptr);
  // MuJoCo rows of the group that starts at frame row i (a plain row, a contact's first row);
  // 0 for a contact's other rows
  int EfcCount(const Problem& p, int i) const;
  // out += scale Hc in on the rows of each contact in the cone zone; of contact c alone
  void ConeAdd(const Problem& p, const double* in, double scale, double* out) const;
  void ConeAddContact(const Problem& p, int c, const double* in, double scale, double* out) const;
  // y += sum_e a_e J_e' over the MuJoCo rows (nrow_), folded into one pass per frame row
  void RowsAdd(const Problem& p, const double* a, double* y);
  // x = H^-1 x in place (islands: dense Cholesky; other trees: the mass matrix)
  void Solve(const Problem& p, double* x);

  int nrow_ = 0;                       // MuJoCo rows of the problem
  const signed char* mode_ = nullptr;  // SetModes' contact modes (the caller's)  (ncon)
  bool modes_changed_ = false;         // the last Prepare's modes changed some state
  bool elliptic_ = false;              // the last Prepare's cone
  double h_ = 0;                       // timestep
  const double* v_next_ = nullptr;     // solution v+                                   (nv)

  // MuJoCo row e is J_a + c J_b over frame rows a, b (b < 0: J_a alone)
  std::vector<int> ra_, rb_;     //                                              (max efc)
  std::vector<double> rc_;       //                                              (max efc)
  std::vector<int> st_;          // SoftState                                    (max efc)
  std::vector<double> D_, f_;    // 1/R, force                                   (max efc)
  std::vector<int> efc_of_row_;  // first MuJoCo row of each frame row's group    (max_rows)
  std::vector<int> con_of_row_;  // contact of each frame row, -1: none           (max_rows)
  const int* group_ = nullptr;   // SharedRowGroups of the problem (SoftRows::group)   (rows)
  std::vector<double> hcone_;    // cone Hessians in jar space, 6x6 per contact   (36 max_con)

  // Hessian blocks of the islands, dense, column-major
  std::vector<double> H_;   //                                              (nv x nv)
  std::vector<int> hadr_;   // start of each island's block                  (ntree)
  std::vector<int> local_;  // index of each dof inside its island           (nv)
  // velocity directions' row terms J' W S J, per island as H_ (column k of a block contiguous)
  std::vector<double> K_;  //                                              (nv x nv)
  bool k_ready_ = false;   // K_ formed since the last Prepare

  // scratch
  std::vector<double> block_;            // an island\'s block (nv x kBlock)
  std::vector<double> t_, rho_, jar_;    // frame rows                       (max_rows)
  std::vector<double> fold_;             // RowsAdd coefficients per frame row  (max_rows)
  std::vector<double> te_, ge_;          // MuJoCo rows                      (max efc)
  std::vector<double> rhs_, tmp_, loc_;  //                                  (nv)
  std::vector<int> loc_cols_;            // local indices of a row's columns   (nv)
  std::vector<double> gbuf_;             // W J_c of a contact                  (6 nv)
};

}  // namespace contactkit

#endif  // CONTACTKIT_SOLVERS_MUJOCO_SOFT_TANGENT_H_
