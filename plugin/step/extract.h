// Copyright 2026 The contactkit developers.
//
// From mjData to the MuJoCo-independent constraint problem, and from a solution back to
// MuJoCo's efc_force, efc_state, qfrc_constraint, qacc and qacc_warmstart.
#ifndef CONTACTKIT_PLUGIN_EXTRACT_H_
#define CONTACTKIT_PLUGIN_EXTRACT_H_

#include <mujoco/mujoco.h>

#include <string>
#include <vector>

#include "solvers/common/problem.h"

namespace contactkit {

// a contact's frame forces fc (dim) on MuJoCo's pyramid edges (J_n + mu_j J_j, J_n - mu_j J_j):
// edges (2 (dim - 1)) with sum f_n and mu_j (f+ - f-) = f_j
inline void FrameToPyramid(const double* fc, const double* mu, int dim, double* edges) {
  const double share = fc[0] / (2 * (dim - 1));
  for (int j = 1; j < dim; j++) {
    const double t = fc[j] / (2 * mu[j - 1]);
    edges[2 * (j - 1)] = share + t;
    edges[2 * (j - 1) + 1] = share - t;
  }
}

class Extractor {
 public:
  // measure the model: trees, capacities; max_contacts 0 means automatic
  bool Setup(const mjModel* m, int max_contacts, std::string* error);

  const ProblemDims& dims() const { return dims_; }
  int ntree() const { return ntree_; }
  const std::vector<int>& dof_tree() const { return dof_tree_; }

  // fill p from d after mj_fwdAcceleration; returns the number of MuJoCo contacts left out for
  // lack of capacity (0 normally)
  int Extract(const mjModel* m, const mjData* d, Problem* p);

  // write a solution into d: efc_force, efc_state, qfrc_constraint, qacc, qacc_warmstart
  void WriteBack(const mjModel* m, mjData* d, const Problem& p, const Solution& sol);

  // Row positions and Jacobians at q+ = q (+) h v_next for the gap re-check (Problem::regap):
  // scratch gets q+, kinematics, tendons, collision and MuJoCo's constraint rows; equality rows
  // are taken in order, limits by (type, id, direction), contacts by geom pair and nearest point
  // (their normal row at q+ from ContactRows). Rows whose counterpart vanished (separated beyond
  // the margin) get their margin and keep their Jacobian. Allocation-free; costs about one
  // position stage of MuJoCo. False if the rows cannot be matched.
  bool Regap(const mjModel* m, const mjData* d, mjData* scratch, const Problem& p,
             const double* v_next, double* pos_next, double* jac_next);

  // Jacobian rows of contact rows in their frame, for a point on two bodies: rows (dim x nnz) at
  // cols (nnz); returns nnz. Used by extraction and by derivative code.
  int ContactRows(const mjModel* m, const mjData* d, int body1, int body2, const double pos[3],
                  const double frame[9], int dim, int* cols, double* rows, int ld);

  // with on, Extract keeps the structural pattern of rows whose Jacobian changes with q
  // (StructuralColumns; explicit zeros included) instead of their nonzeros, so that a derivative
  // of the values has a place where a value happens to be zero (the derivative module's problems)
  void set_structural(bool on) { structural_ = on; }

  // ascending columns a row of MuJoCo constraint type / id can touch when its Jacobian changes
  // with q (connect and weld: the dofs moving either body; ball limits: the ball's dofs); -1 if
  // the row's Jacobian is kept as its nonzeros
  int StructuralColumns(const mjModel* m, int type, int id, int* cols);

 private:
  // the effective mass and the unconstrained velocity v_free
  void Dynamics(const mjModel* m, const mjData* d, Problem* p);
  // append efc row i (equality, friction or limit) at p->nrow; *nnz grows by its nonzeros
  void AddRow(const mjModel* m, const mjData* d, int i, Problem* p, int* nnz);
  // append contact mc, whose first efc row is i, as dim frame rows at p->nrow
  void AddContact(const mjModel* m, const mjData* d, const mjContact* mc, int i, Problem* p,
                  int* nnz);

  ProblemDims dims_;
  int ntree_ = 0;
  bool structural_ = false;      // Extract keeps structural patterns
  int maxpair_ = 0;              // most dofs a contact row can touch
  std::vector<int> dof_tree_;    // tree of each dof                           (nv)
  std::vector<int> chain1_;      // dof chain of body 1, descending            (nv)
  std::vector<int> chain2_;      // dof chain of body 2, descending            (nv)
  std::vector<double> jac_;      // translational/rotational Jacobian scratch  (6 x nv)
  std::vector<int> chain_cols_;  // columns of a contact row (gap re-check)    (nv)
};

}  // namespace contactkit

#endif  // CONTACTKIT_PLUGIN_EXTRACT_H_
