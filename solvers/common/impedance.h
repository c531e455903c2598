// Copyright 2026 The contactkit developers.
//
// MuJoCo's soft-constraint parameters (Computation chapter, "Parameters"): the impedance
// function d(r) of solimp = (d0, dwidth, width, midpoint, power), and the reference
// acceleration a_ref = -B v - K d r from solref = (timeconst, dampratio) or (-stiffness, -damping).
#ifndef CONTACTKIT_SOLVERS_COMMON_IMPEDANCE_H_
#define CONTACTKIT_SOLVERS_COMMON_IMPEDANCE_H_

namespace contactkit {

// impedance d at violation r = pos - margin, and its derivative dd/dpos (nullable)
double Impedance(const double solimp[5], double pos, double margin, double* dimp = nullptr);

// reference stiffness K and damping B (standard or direct solref), as MuJoCo computes them
void ReferenceKB(const double solref[2], const double solimp[5], double* K, double* B);

// MuJoCo's clamps: solref[0] >= 2h in standard format (unless disabled), solimp ranges
void ClampSolParams(double h, bool refsafe, double solref[2], double solimp[5]);

// a contact's softness as MuJoCo makes it: solref and solimp clamped in place, then the
// impedance at (dist, margin) and the reference stiffness K and damping B
void ContactSoftness(double h, bool refsafe, double dist, double margin, double solref[2],
                     double solimp[5], double* imp, double* K, double* B);

// a contact's rows' regularizers R (dim), MuJoCo's elliptic convention: R0 from the impedance and
// the normal row's diag_approx, R1 = R0 / impratio, R_j mu_j^2 = R1 mu_0^2 for the other rows
void ContactRegularizers(double imp, double diag_approx, double impratio, const double mu[5],
                         int dim, double* R);

}  // namespace contactkit

#endif  // CONTACTKIT_SOLVERS_COMMON_IMPEDANCE_H_
