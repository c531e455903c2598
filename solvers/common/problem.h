// Copyright 2026 The contactkit developers.
//
// The constraint problem every solver consumes: one step of MuJoCo's dynamics in generalized
// coordinates, with the constraints grouped as MuJoCo defines them and contacts in their own
// frames, whatever the model's cone type and Jacobian storage. Independent of MuJoCo's types: the
// bridge in plugin/ fills it once per step after the acceleration stage.
#ifndef CONTACTKIT_SOLVERS_COMMON_PROBLEM_H_
#define CONTACTKIT_SOLVERS_COMMON_PROBLEM_H_

#include <cstddef>
#include <cstdint>

#include "contactkit/settings.h"
#include "solvers/common/arena.h"
#include "solvers/common/islands.h"
#include "solvers/common/mass.h"
#include "solvers/common/sparse.h"

namespace contactkit {

// row kinds, in MuJoCo's order (equality, friction loss, limits, contacts)
enum RowKind : int {
  kRowEquality = 0,     // bilateral: J v+ + pos/h = 0
  kRowFriction,         // friction loss: |f| <= floss
  kRowLimit,            // unilateral joint or tendon limit: dist = pos
  kRowContactNormal,    // contact normal: dist = pos
  kRowContactFriction,  // contact tangent (2), torsion (1) or rolling (2) direction
};

// one contact; its rows are [row, row + dim) in the contact frame
struct Contact {
  int row;           // first row (normal)
  int dim;           // 1, 3, 4 or 6: normal, tangent1, tangent2, torsion, roll1, roll2
  double dist;       // signed distance (m); negative: penetration
  double margin;     // inclusion margin (m): contact exists while dist < margin
  double mu[5];      // friction: tangent1, tangent2, torsion, roll1, roll2
  double frame[9];   // rows: normal, tangent1, tangent2 (world frame)
  double pos[3];     // contact point (world frame)
  double solref[2];  // MuJoCo solref (after MuJoCo's safety clamps)
  double solimp[5];  // MuJoCo solimp (after MuJoCo's clamps)
  int tree[2];       // kinematic trees of the two bodies (-1: world / static)
  int geom[2];       // MuJoCo geom ids (stable across steps: match contacts for warm starts)
  int body[2];       // MuJoCo body ids
  bool relocates;    // the collider moves the points of this geom pair's patch over a surface
                     // as the pose changes (a cylinder's rim triangle turns with its tilt)
  int efc_address;   // first row of this contact in MuJoCo's efc arrays
  int mj_index;      // index in MuJoCo's contact list

  // contacts from distance (the derivative's own pass only; docs/derivatives.md): a contact
  // beyond its margin by r >= 0 that acts as if it could push. cfd_pos = s(r) < 0 is the
  // softplus position standing in for its gap pos - margin, cfd_slope = ds/dr > 0 its slope;
  // both 0 for every other contact (and in every step)
  double cfd_pos;    // softplus position s(r) (m), 0: a plain contact
  double cfd_slope;  // d s / d dist
};

// the contact is a contact from distance (a surrogate for the derivative only)
inline bool FromDistance(const Contact& con) { return con.cfd_slope > 0; }

// sizes fixed at setup; everything in a Problem fits in them
struct ProblemDims {
  int nv = 0;            // degrees of freedom
  int nM = 0;            // entries of the tree-sparse mass matrix
  int ntree = 0;         // kinematic trees
  int max_rows = 0;      // constraint rows
  int max_contacts = 0;  // contacts
  int max_nnz = 0;       // nonzeros of the constraint Jacobian
};

struct Problem;

// Row positions at the end of the step (optional, for solvers that re-check gaps): given the
// solution's v+, write for every row the pos it has at q+ = q (+) h v+ (contact distances from
// collision of the same geom pairs, a pair that separated beyond its margin reporting its margin;
// limit distances; equality residuals) and, in J's sparsity pattern, the rows' Jacobian at q+
// (d pos / d q+; contacts: the normal at q+). Returns false if it could not.
typedef bool (*RegapFunction)(void* context, const Problem& p, const double* v_next,
                              double* pos_next, double* jac_next);

// one step's constraint problem (all arrays owned by a ProblemStorage)
struct Problem {
  // dynamics: M_eff (v+ - v) = h qfrc_smooth + h J' f
  int nv = 0;                           // degrees of freedom
  double h = 0;                         // timestep (s)
  const double* qvel = nullptr;         // current velocity v                        (nv)
  const double* qfrc_smooth = nullptr;  // smooth generalized force            (nv)
  double* v_free = nullptr;             // v + h M_eff^-1 qfrc_smooth                 (nv)
  TreeMass mass;                        // M_eff = M + h*(implicit damping), factored

  // constraint rows: equality [0, ne), friction [ne, ne+nf), limits, then contacts
  int nrow = 0;              // rows in total
  int ne = 0;                // equality rows
  int nf = 0;                // friction-loss rows
  int nl = 0;                // limit rows
  SparseRows J;              // constraint Jacobian, contact rows in contact frames
  int* kind = nullptr;       // RowKind                                    (nrow)
  int* mj_type = nullptr;    // MuJoCo's mjtConstraint of the row          (nrow)
  int* mj_id = nullptr;      // MuJoCo object id (contact: index in con)   (nrow)
  double* pos = nullptr;     // equality residual, limit/contact distance  (nrow)
  double* margin = nullptr;  // limit/contact inclusion margin             (nrow)
  double* floss = nullptr;   // friction-loss bound (friction rows)        (nrow)
  double* vel = nullptr;     // J v                                        (nrow)

  // MuJoCo's soft-constraint quantities for every row (elliptic-cone convention for contacts)
  double* diag_approx = nullptr;  // MuJoCo's approximation of diag(J M^-1 J')  (nrow)
  double* imp = nullptr;          // impedance d(pos) in (0, 1)                 (nrow)
  double* R = nullptr;            // regularizer (1-d)/d * diag_approx          (nrow)
  double* aref = nullptr;         // reference acceleration -B vel - K d (pos-margin) (nrow)
  double* KB = nullptr;           // stiffness K and damping B of the reference (nrow x 2)

  // contacts
  int ncon = 0;            // contacts
  Contact* con = nullptr;  // contacts in row order                     (ncon)
  bool elliptic = false;   // the model's friction cone is elliptic, else pyramidal

  // structure
  Islands islands;                // trees coupled by rows
  const int* dof_tree = nullptr;  // tree of each dof                           (nv)

  // tangential displacement of each contact from its anchor (comfree's position-level stick), in
  // the contact frame at rows row + 1, row + 2 of contacts with dim >= 3, and at row the state
  // the solver kept with the anchor (comfree: the slip-speed envelope while it slides, else 0; 0
  // for a new anchor) (null: no anchors)
  const double* disp = nullptr;  //                                            (nrow)

  // gap re-check at q+ (null: not available)
  RegapFunction regap = nullptr;
  void* regap_context = nullptr;
};

// solver output, in the problem's rows
struct Solution {
  double* force = nullptr;   // constraint force f (impulse / h) of each row     (max_rows)
  double* v_next = nullptr;  // velocity after the step v+                       (nv)
  int status = 0;            // ckStatus
  int iterations = 0;        // solver iterations
  double residual = 0;       // final residual
  double kappa = 0;          // final complementarity
  double condition = 0;      // conditioning estimate (0: unknown)

  // optional (null: unused): forces on MuJoCo's pyramid edges J_n + mu_i J_i, J_n - mu_i J_i
  // (i = 1 .. dim-1) of each contact at 2 * con.row, for solvers whose unknowns are these edges;
  // the write-back then stores them in efc_force of pyramidal models instead of splitting the
  // frame force evenly. The solver owns the array and sets the pointer in each Solve.
  const double* edge_force = nullptr;  //                                         (2 max_rows)

  // optional (null: unused): for problems with disp, the displacement each contact keeps as its
  // anchor for the next step and its state, at the rows of disp. The solver owns the array and
  // sets the pointer in each Solve.
  const double* anchor_disp = nullptr;  //                                        (max_rows)

  // optional (null: none): a pseudo-velocity that moves the positions only, after the step's
  // integration: q+ = q+ (+) h position_correction (lcp's split impulse). Owned by the solver,
  // set in each Solve.
  const double* position_correction = nullptr;  //                                (nv)

  // before each Solve: status SOLVED, counters zero, no optional outputs (a solver sets only the
  // ones it owns, so a pointer left from another solver would point into freed memory)
  void Reset() {
    status = 0;
    iterations = 0;
    residual = kappa = condition = 0;
    edge_force = anchor_disp = position_correction = nullptr;
  }
};

// w' dM_k w for the mass matrix's tangents dM_k along the positions of the dofs k of a tree, all
// k at once (the derivative module's analytic position tangents, without forming dM)
class MassForms {
 public:
  virtual ~MassForms() = default;
  // q[k - begin] = w' dM_k w for each dof k of the tree [begin, end), w on its dofs (w[0] is
  // dof begin's)
  virtual void Forms(const double* w, int begin, int end, double* q) const = 0;
  // Forms of n <= kFormLanes vectors w[l] at once into q + l ldq (each vector's bits as Forms')
  static constexpr int kFormLanes = 4;
  virtual void FormsLanes(const double* const* w, int n, int begin, int end, double* q,
                          size_t ldq) const {
    for (int l = 0; l < n; l++) Forms(w[l], begin, end, q + l * ldq);
  }
  // y -= dM_k x on dM_k's rows (k's tree), without forming dM_k
  virtual void SubProduct(int k, const double* x, double* y) const = 0;
  // dM_k's values written to the tangent's M (once per direction: later calls return at once)
  virtual void FormMatrix(int k) = 0;
};

// a perturbation of the problem data along one direction; null members do not change. Rows,
// contacts and the Jacobian's sparsity pattern stay those of the problem.
struct ProblemTangent {
  const double* v_free = nullptr;       // d v_free                                    (nv)
  const double* M = nullptr;            // d M_eff, tree layout                        (nM)
  const double* J = nullptr;            // d J values, same pattern                    (nnz)
  const double* pos = nullptr;          // d pos (gaps, equality residuals)            (nrow)
  const double* vel = nullptr;          // d (J v)                                     (nrow)
  const double* R = nullptr;            // d R                                         (nrow)
  const double* diag_approx = nullptr;  // d diag_approx (a mass parameter)             (nrow)
  const double* aref = nullptr;         // d aref                                      (nrow)
  const double* disp = nullptr;         // d disp (anchor held fixed)                  (nrow)
  // with v_free null (Solver::DefersFreeVelocity): d v_free = e_unit + h M_eff^-1 v_free_rhs,
  // the solve left to the solver (unit -1: no unit term)
  const double* v_free_rhs = nullptr;  //                                           (nv)
  int v_free_unit = -1;
  // a velocity direction whose row tangents were left unformed (Solver::FormsVelocityRows; vel,
  // aref and R null): its dof, with d (J v) = J e_vel_unit and d aref = -B d (J v); -1: none
  int vel_unit = -1;
  // islands whose data the perturbation may change (a superset; IslandReach), null: unknown
  const uint8_t* touched = nullptr;  //                                            (nisland)
  // the rows of dM that can be nonzero, ascending and all in one tree; null: any row
  const int* M_rows = nullptr;  //                                                 (M_nrows)
  int M_nrows = 0;
  // d J v_free of the problem's v_free (nrow); where given (or J_vnext), J holds the rows of
  // Solver::TangentJacobianRows only
  const double* J_vfree = nullptr;
  // dJ_i w_i (nrow) with w_i = M_eff^-1 J_i' (Solver::TangentRowWeight) on the rows J_w_rows
  // marks (nrow, 1: given); J holds no values there
  const double* J_w = nullptr;
  const char* J_w_rows = nullptr;
  // J on Solver::TangentJacobianRows' rows only, the rest in products (ReadsJacobianProducts):
  // dJ v+ of the solution's v+ (nrow), dJ' f of its force (nv), dJ x and dJ' y of
  // Solver::TangentProducts' x and y (nrow, nv; null: none)
  const double* J_vnext = nullptr;
  const double* J_force = nullptr;
  const double* J_x = nullptr;
  const double* J_y = nullptr;
  // M is M_forms' dM_k of dof k = M_dof (its forms w' M w without M); null: not known
  const MassForms* M_forms = nullptr;
  int M_dof = -1;
  // M's values are formed on their first read (Mass()) by M_lazy of dof M_dof, and its
  // products (SubMassTangent) are M_lazy's closed form; null: M is formed
  MassForms* M_lazy = nullptr;
  // M's values (M itself, non-null, says whether the direction moves M)
  const double* Mass() const {
    if (M_lazy) M_lazy->FormMatrix(M_dof);
    return M;
  }
};

// weights of a ProblemTangent's row arrays (Solver::AdjointRowWeights adds into them)
struct RowWeights {
  double* J = nullptr;     // of d J's values   (nnz)
  double* pos = nullptr;   // of d pos          (nrow)
  double* vel = nullptr;   // of d (J v)        (nrow)
  double* R = nullptr;     // of d R            (nrow)
  double* aref = nullptr;  // of d aref         (nrow)
};

// owns a Problem's and a Solution's arrays, allocated once
class ProblemStorage {
 public:
  ProblemStorage() = default;
  ProblemStorage(const ProblemStorage&) = delete;
  ProblemStorage& operator=(const ProblemStorage&) = delete;

  // allocate for dims; the tree structure (parent, Madr, tree of dofs) is copied
  void Allocate(const ProblemDims& dims, const int* dof_parent, const int* dof_madr,
                const int* dof_tree, int ntree);

  const ProblemDims& dims() const { return dims_; }
  Problem& problem() { return problem_; }
  Solution& solution() { return solution_; }

 private:
  ProblemDims dims_;
  Problem problem_;
  Solution solution_;
  Arena arena_;
};

// y -= dM x on the dofs [begin, end) (whole trees), dM the tangent's M (dir.M non-null)
void SubMassTangent(const Problem& p, const ProblemTangent& dir, const double* x, double* y,
                    int begin, int end);

// v+ = v_free + M_eff^-1 J' f h for the rows' forces; also writes J'f into qfrc (nv), nullable
void VelocityFromForce(const Problem& p, const double* force, double* v_next, double* qfrc);

// tangent of v+ = v_free + h M^-1 J' f given the force tangent df (nrow):
// dv = dv_free + h M^-1 (J' df + dJ' f - dM M^-1 J' f); scratch (nv) is overwritten
void VelocityTangent(const Problem& p, const Solution& sol, const ProblemTangent& dir,
                     const double* dforce, double* dv, double* scratch);

// x = M^-1 x for the nb columns of the row-major block x (nb 1: a vector) on the kinematic trees
// [t0, t1) of is, tree by tree, skipping the trees where x is zero (their solve gives zero); the
// other trees' rows are neither read nor written
void SolveNonzeroTrees(const TreeMass& mass, const Islands& is, int t0, int t1, double* x,
                       int nb = 1);

// dir's d v_free into out (nv): dir.v_free, or with the solve deferred (dir.v_free_rhs) e_unit +
// h M_eff^-1 v_free_rhs, solved on the trees where the right-hand side is not zero
void FreeVelocityOf(const Problem& p, const ProblemTangent& dir, double* out);

// the deferred d v_free of n columns at once: column cols[k] of X (nv rows, stride ld) holds a
// direction's v_free_rhs and becomes e_unit[k] + h M_eff^-1 of it (FreeVelocityOf's operations),
// on the trees of island (-1: every tree; the others' rows are neither read nor written);
// scratch (nv n), or null to solve X in place (cols then 0 .. n - 1; columns n to the next
// multiple of 4 within ld are overwritten)
void FreeVelocities(const Problem& p, int island, double* X, int ld, const int* cols,
                    const int* unit, int n, double* scratch);

// calls f(tree, k0, k1) for each kinematic tree row i touches, with the row's nonzeros in that
// tree at J.rowadr[i] + [k0, k1) (columns ascend, so each tree's nonzeros are contiguous)
template <typename F>
void ForEachRowTree(const Problem& p, int i, F f) {
  const int adr = p.J.rowadr[i], nnz = p.J.rownnz[i];
  int k = 0;
  while (k < nnz) {
    const int t = p.dof_tree[p.J.colind[adr + k]], k0 = k;
    const int end = p.islands.tree_dofadr[t] + p.islands.tree_dofnum[t];
    while (k < nnz && p.J.colind[adr + k] < end) k++;
    f(t, k0, k);
  }
}

// effective inverse mass J_i M_eff^-1 J_i' of row i, by half solves (L'^-1 J_i') on the trees the
// row touches; x (nv) must be zero and is zero again on return
double RowInvMass(const Problem& p, int i, double* x);

// 1 if every number in the problem is finite
bool ProblemIsFinite(const Problem& p);

}  // namespace contactkit

#endif  // CONTACTKIT_SOLVERS_COMMON_PROBLEM_H_
