// Copyright 2026 The contactkit developers.
//
// The reverse pass of the smooth stage's Newton-Euler tangents (smooth_adjoint.cc): for one
// adjoint x, x' d(M a + bias)/dq_k, x' d(M (a - aint))/dq_k and x' d bias/dv_k of every dof k from
// sums over the tree made once, instead of a tangent vector per direction (SmoothTangent's
// RneTangent and RneVelTangent, whose weighted sums these are).
#ifndef CONTACTKIT_PLUGIN_DERIV_SMOOTH_ADJOINT_H_
#define CONTACTKIT_PLUGIN_DERIV_SMOOTH_ADJOINT_H_

#include "plugin/deriv/workspace.h"

namespace contactkit {

// the sums of one adjoint (pass 0: the weights of d(M a + bias), pass 1: of d(M (a - aint)))
struct RneAdjointWork {
  double* carried_crb;   // sum of x_j crb cdof_j over the dofs j >= i of i's subtree  (2 x 6 nv)
  double* carried_bsub;  // the same of x_j Bsub' cdof_j (pass 0)                      (6 nv)
  double* chain;         // sum of x_j cdof_j over i and its ancestor dofs             (2 x 6 nv)
  double* child;         // the carried sums (crb, bsub) of each body, per pass       (24 nbody)
  double* row_w;         // each row's weights of d vel, d(J v+) and d pos (RowAdjointDot)  (3 rows)
  double* row_jw;        // J' (the rows' dvel weights): a velocity direction's rows' term   (nv)
  double* row_y;       // J x, then the rows' tau and sigma (SoftTangent::RowAdjoint)      (3 rows)
  double* contact_g;   // the closed contacts' gradients on each body's twist, summed over its
                       // subtree (ContactAdjoint)                                     (6 nbody)
  double* contact_p;   // their forces weighted against u, u+ and u_x, the same sums   (18 nbody)
  double* vel_x;       // each body's velocity sum of x_j cdof_j                        (6 nbody)
  char* contact_rev;   // each problem contact's rows in reverse (1) or per direction   (ncon)
  double* solver_w;    // a solver's weights of d pos, d vel, d R, d aref, then of d pos and d vel
                       // with RowTangents transposed                                   (4 rows)
  double* solver_J;    // its weights of d J, with d vel's folded in on the contacts      (nnz)
  double* suffix;      // per contact row entry and side, sum of sign w_J cdof over the entries
                       // from it on (the carried columns' sum)                       (12 nnz)
  double* col_pos;     // the plain rows' J' (d pos weights): a position direction's   (nv)
  double* contact_pq;  // per contact and side, the weights P of d p and Q of d F (its
                       // columns' sums of d rho . w_J)                              (24 ncon)
  bool ready = false;  // prepared for the current adjoint (PrepareRneAdjoint)
  bool rows = false;   // and the rows' weights (PrepareRowAdjoint)
  bool contacts = false;     // and the closed contacts (PrepareContactAdjoint)
  bool damped = false;       // and pass 1 too
  bool solver_rows = false;  // a solver's row weights (PrepareSolverRowAdjoint)
  void Carve(ArenaCarver& c, const DerivSizes& n);
};

}  // namespace contactkit

#endif  // CONTACTKIT_PLUGIN_DERIV_SMOOTH_ADJOINT_H_
