// Copyright 2026 The contactkit developers.
//
// Analytic position tangents of the smooth data for the blocked "mujoco" path. Perturbing dof k
// moves the bodies of its subtree rigidly by the motion S = cdof_k (expressed, like everything in
// MuJoCo's com-based frame, at the subtree center of mass of its tree, held fixed), so that
//   - the motion axes the perturbation carries change by S x cdof_j, inertias by
//     dI x = S x* (I x) - I (S x x), and MuJoCo's recursive Newton-Euler pass (mj_rne, with the
//     cdof_dot convention of mj_comVel) is differentiated in one sweep over the subtree and its
//     ancestors: d(M a + bias)/dq_k, and d(M w)/dq_k for Euler's implicit damping;
//   - geom poses change by the same rigid motion, so MuJoCo's collision functions run again only
//     for the contact pairs the subtree touches, on poses perturbed by a tiny step (the contact
//     point, frame and distance are differenced; the contact rows are differentiated from them
//     and the carried axes);
//   - joint springs of hinges and slides and joint-transmission actuators (their lengths move
//     with q, differenced through mj_fwdActuation) give the rest.
// Models outside this scope (tendons, other transmissions, ball and free joint springs, fluid
// forces, applied Cartesian forces, equality constraints and limits whose Jacobian changes, the
// implicit integrator, sensors, callbacks) use the position passes of smooth_tangent.cc.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "plugin/deriv/smooth_tangent.h"
#include "plugin/deriv/spatial.h"
#include "plugin/step/compat.h"
#include "plugin/step/handle.h"
#include "solvers/common/columns.h"
#include "solvers/common/dense.h"

namespace contactkit {
namespace {

using namespace spatial;  // NOLINT(build/namespaces)

constexpr double kPoseStep = 1e-7;     // step of the perturbed geom poses
constexpr double kRelativeTol = 1e-6;  // RelativeCheck's agreement, of the tangent's size
constexpr double kJumpRatio = 10;      // a contact point moving this much faster on one side of a
                                       // step than on the other (and faster than this, in m per
                                       // unit of the direction) jumped there

// the velocity sum_j x_j cdof_j of each body (cv, 6 nbody) and before each dof within its body
// (before, 6 nv)
void BodyVelocities(const mjModel* m, const double* cdof, const double* x, double* cv,
                    double* before) {
  Zero6(cv);
  for (int b = 1; b < m->nbody; b++) {
    double v[6];
    Copy6(v, cv + 6 * m->body_parentid[b]);
    for (int j = m->body_dofadr[b]; j < m->body_dofadr[b] + m->body_dofnum[b]; j++) {
      Copy6(before + 6 * j, v);
      AddScl6(v, cdof + 6 * j, x[j]);
    }
    Copy6(cv + 6 * b, v);
  }
}

// Dot6(x, T_j) of the 6-vector j of a table transposed to six rows of stride nv, for one j
// (V double) or two (V Pair), Dot6's operations element by element
using columns::Pair;

template <class V>
CK_ALWAYS_INLINE V LoadAt(const double* p) {
  V v;
  std::memcpy(&v, p, sizeof(V));
  return v;
}

template <class V>
CK_ALWAYS_INLINE void StoreAt(double* p, const V& v) {
  std::memcpy(p, &v, sizeof(V));
}

template <class V>
CK_ALWAYS_INLINE V Dot6Of(const double* T, size_t nv, const double* x, int j) {
  return (x[0] * LoadAt<V>(T + j) + x[1] * LoadAt<V>(T + nv + j) +
          x[2] * LoadAt<V>(T + 2 * nv + j)) +
         (x[3] * LoadAt<V>(T + 3 * nv + j) + x[4] * LoadAt<V>(T + 4 * nv + j) +
          x[5] * LoadAt<V>(T + 5 * nv + j));
}

// f(j, V{}) over [lo, hi): two j at a time (V Pair), then one (V double)
template <class F>
CK_ALWAYS_INLINE void PairLoop(int lo, int hi, F f) {
  int j = lo;
  for (; j + 2 <= hi; j += 2) f(j, Pair{});
  for (; j < hi; j++) f(j, 0.0);
}

// one side's row r of dJ x (SolverRowTerms): tan[0][r] . V with V x's velocity at the body, or
// for a carried body tan[0][r] . u + tan[1][r] . (V - u) with u x's velocity before the carried
// dofs
inline double CarriedDot(const double (*tan)[6][6], int r, bool carried, const double* u,
                         const double* V) {
  double s = Dot6(tan[0][r], carried ? u : V);
  for (int i = 0; i < 6 && carried; i++) s += tan[1][r][i] * (V[i] - u[i]);
  return s;
}

// the rotation exp(e [w]x) (Rodrigues), row-major: colliders read a geom's frame as
// orthonormal, and some (MuJoCo 3.x's plane-cylinder) see no tilt at all in R + e [w]x R
void Rotation(const double* w, double e, double Q[9]) {
  const double n = std::sqrt(Dot3(w, w)), a = e * n;
  double k[3] = {0, 0, 0};
  if (n > 0) {
    for (int i = 0; i < 3; i++) k[i] = w[i] / n;
  }
  const double s = std::sin(a), c1 = 1 - std::cos(a);
  const double K[9] = {0, -k[2], k[1], k[2], 0, -k[0], -k[1], k[0], 0};
  for (int r = 0; r < 3; r++) {
    for (int c = 0; c < 3; c++) {
      double kk = 0;
      for (int i = 0; i < 3; i++) kk += K[3 * r + i] * K[3 * i + c];
      Q[3 * r + c] = (r == c) + s * K[3 * r + c] + c1 * kk;
    }
  }
}

// a body's B w = I (w x v) + w x* (I v) + v x* (I w), row-major 6 x 6, column by column from
// the unit vectors (the test hook's path)
void BodyBByColumns(const double* inert, const double* v, const double* iv, double* B) {
  for (int i = 0; i < 6; i++) {
    double x[6] = {0, 0, 0, 0, 0, 0}, t[6], col[6], ix[6];
    x[i] = 1;
    CrossMotion(t, x, v);
    MulInert(col, inert, t);
    CrossForce(t, x, iv);
    for (int r = 0; r < 6; r++) col[r] += t[r];
    MulInert(ix, inert, x);
    CrossForce(t, v, ix);
    for (int r = 0; r < 6; r++) B[6 * r + i] = col[r] + t[r];
  }
}

// the same in closed form. With I = [J [h]x; -[h]x m] (MuJoCo's cinert: J the rotational
// inertia, h = inert[6..8]), v = (o, l) and I v = (f, g): the right half vanishes, the lower left
// block is -2 [g]x and the upper left W J + (W J)' - l h' - h l' + 2 (h . l) 1 - [f]x, W = [o]x
void BodyB(const double* inert, const double* v, const double* iv, double* B) {
  const double J[9] = {inert[0], inert[3], inert[4], inert[3], inert[1],
                       inert[5], inert[4], inert[5], inert[2]};
  const double *h = inert + 6, *l = v + 3, *f = iv, *g = iv + 3;
  double wj[9];  // W J, row-major
  for (int c = 0; c < 3; c++) {
    wj[c] = v[1] * J[6 + c] - v[2] * J[3 + c];
    wj[3 + c] = v[2] * J[c] - v[0] * J[6 + c];
    wj[6 + c] = v[0] * J[3 + c] - v[1] * J[c];
  }
  const double hl2 = 2 * Dot3(h, l);
  const double fx[9] = {0, -f[2], f[1], f[2], 0, -f[0], -f[1], f[0], 0};  // [f]x
  const double gx[9] = {0, -g[2], g[1], g[2], 0, -g[0], -g[1], g[0], 0};  // [g]x
  for (int r = 0; r < 3; r++) {
    for (int c = 0; c < 3; c++) {
      B[6 * r + c] = wj[3 * r + c] + wj[3 * c + r] - l[r] * h[c] - h[r] * l[c] - fx[3 * r + c] +
                     (r == c ? hl2 : 0);
      B[6 * (r + 3) + c] = -2 * gx[3 * r + c];
      B[6 * r + c + 3] = 0;
      B[6 * (r + 3) + c + 3] = 0;
    }
  }
}

// a contact side's data for PointVelocities
struct PointSide {
  int body, dim, row;
  double sg;            // the side's sign in the rows
  const double* S;      // the direction's twist, null: the body not carried
  const double* off;    // the point from the side's tree center
  const double* dp;     // the point's tangent
  const double* dF;     // the frame's tangent
  const double* frame;  // the nominal frame
};

// PointRows' vectors of one side at body velocity V (u before the carried dofs): c = V_w x dp
// (+ m_v + m_w x off, carried), pt = V_w x off + V_v, mw = m_w, m = S x (V - u)
CK_ALWAYS_INLINE void PointChannel(const PointSide& ps, const double* V, const double* u,
                                   double c[3], double pt[3], double mw[3]) {
  Cross3(c, V, ps.dp);
  Cross3(pt, V, ps.off);
  for (int i = 0; i < 3; i++) pt[i] += V[3 + i];
  if (!ps.S) return;
  double dv[6], mm[6], t[3];
  for (int i = 0; i < 6; i++) dv[i] = V[i] - u[i];
  CrossMotion(mm, ps.S, dv);
  Cross3(t, mm, ps.off);
  for (int i = 0; i < 3; i++) {
    c[i] += mm[3 + i] + t[i];
    mw[i] = mm[i];
  }
}

// row r's sum from PointChannel's vectors: a_r . V + [carried] rho_r . (S x (V - u))
CK_ALWAYS_INLINE double PointRowDot(const PointSide& ps, int r, const double* V, const double* c,
                                    const double* pt, const double* mw) {
  const int ax = r < 3 ? r : r - 3;
  const double *F = ps.frame + 3 * ax, *dFr = ps.dF + 3 * ax;
  return r < 3 ? Dot3(F, c) + Dot3(dFr, pt) : Dot3(dFr, V) + Dot3(F, mw);
}

// SmoothTangent::PointRows' velocity sums of one side on N channels: out[k][row + r] += sg (a_r .
// V + [carried] rho_r . (S x (V - u))) with V = body_vel[k] of the body, u = before[k]
template <int N>
CK_ALWAYS_INLINE void PointVelocities(const PointSide& ps, const double* const* body_vel,
                                      const double* const* before, double* const* out) {
  double c[N][3], pt[N][3], mw[N][3] = {};  // F's and dF's vectors, m_w (rotation rows)
  for (int k = 0; k < N; k++)
    PointChannel(ps, body_vel[k] + 6 * ps.body, before[k], c[k], pt[k], mw[k]);
  for (int r = 0; r < ps.dim; r++) {
    for (int k = 0; k < N; k++) {
      out[k][ps.row + r] +=
          ps.sg * PointRowDot(ps, r, body_vel[k] + 6 * ps.body, c[k], pt[k], mw[k]);
    }
  }
}

// PointRows' wrenches of one side weighted by f (rows): sum f_r a_r in wrench[0] and, the side
// carried (ps.S), sum f_r b_r in wrench[1]: sum f a = [dp x phi + off x dphi + drot; dphi], sum f
// rho = [off x phi + psi; phi] with phi, dphi the translation rows' sums of f F, f dF and psi, drot
// the rotation rows'
CK_ALWAYS_INLINE void PointWrench(const PointSide& ps, const double* f, double (*wrench)[6]) {
  double phi[3] = {}, dphi[3] = {}, psi[3] = {}, drot[3] = {};
  const int nt = ps.dim < 3 ? ps.dim : 3;
  for (int r = 0; r < nt; r++) {
    const double fr = f[ps.row + r];
    for (int i = 0; i < 3; i++) {
      phi[i] += fr * ps.frame[3 * r + i];
      dphi[i] += fr * ps.dF[3 * r + i];
    }
  }
  for (int r = 3; r < ps.dim; r++) {
    const double fr = f[ps.row + r];
    for (int i = 0; i < 3; i++) {
      psi[i] += fr * ps.frame[3 * (r - 3) + i];
      drot[i] += fr * ps.dF[3 * (r - 3) + i];
    }
  }
  double* w0 = wrench[0];
  double t1[3], t2[3];
  Cross3(t1, ps.dp, phi);
  Cross3(t2, ps.off, dphi);
  for (int i = 0; i < 3; i++) {
    w0[i] = t1[i] + t2[i] + drot[i];
    w0[3 + i] = dphi[i];
  }
  if (!ps.S) return;  // (not carried: the caller's zeros)
  double P[6], sp[6];
  Cross3(P, ps.off, phi);
  for (int i = 0; i < 3; i++) {
    P[i] += psi[i];
    P[3 + i] = phi[i];
  }
  CrossForce(sp, ps.S, P);
  for (int i = 0; i < 6; i++) wrench[1][i] = w0[i] - sp[i];
}

}  // namespace

// the rates of MakeFrame's tangent and third axis as the normal n of frame moves by dF[0..2]:
// t = p / |p| with p = t0 - (n.t0) n, t0 = (0, 1, 0), or (0, 0, 1) where |n_y| >= 1/2, moves by
// (I - t t') dp / |p|, the third axis n x t by dn x t + n x dt
void NormalFrameRate(const double* frame, double dF[9]) {
  const double* n = frame;
  const double* dn = dF;
  const int a = n[1] < 0.5 && n[1] > -0.5 ? 1 : 2;
  const double nt = n[a], dnt = dn[a], len = std::sqrt(1 - nt * nt);
  const double* t = frame + 3;
  double q[3];
  for (int k = 0; k < 3; k++) q[k] = -dnt * n[k] - nt * dn[k];
  UnitRate(t, q, 1 / len, dF + 3);
  double x[3];
  Cross3(dF + 6, dn, t);
  Cross3(x, n, dF + 3);
  for (int k = 0; k < 3; k++) dF[6 + k] += x[k];
}

bool SmoothTangent::AnalyticScope(const mjModel* m) const {
  // what the analytic position tangents cover (everything else: position passes)
  if (m->ntendon || mjcb_passive || mjcb_control || mjcb_act_dyn || mjcb_act_gain ||
      mjcb_act_bias || mjcb_contactfilter || m->opt.density > 0 || m->opt.viscosity > 0) {
    return false;
  }
  for (int j = 0; j < m->njnt; j++) {
    const int type = m->jnt_type[j];
    if ((type == mjJNT_BALL || type == mjJNT_FREE) && m->jnt_stiffness[j] != 0) return false;
  }
  for (int i = 0; i < m->nu; i++) {
    if (m->actuator_trntype[i] != mjTRN_JOINT) return false;
    const int type = m->jnt_type[m->actuator_trnid[2 * i]];
    if (type != mjJNT_HINGE && type != mjJNT_SLIDE) return false;
  }
#if CK_MJ3
  for (int b = 0; b < m->nbody; b++) {
    if (m->body_gravcomp[b] != 0) return false;
  }
  if (m->nflex) return false;
#endif
  return rne_.subtree_contiguous;
}

void SmoothTangent::DecideAnalytic(const mjModel* m) {
  // implicit: only implicitfast without bias forces in qDeriv, whose passive and actuator terms
  // are constant in q and v within the scope (joint transmissions, no tendons, no fluid): its
  // tangents are Euler's implicit damping's with M - h qDeriv for M + h D
  const bool integrator = !integrator_.implicit || integrator_.fast_no_bias;
  analytic_ =
      !stage_.sensors && integrator && !(stage_.has_rows && plain_varying_) && AnalyticScope(m);
  for (int i = 0; i < 6 * m->nbody && analytic_; i++) analytic_ = stage_data_->xfrc_applied[i] == 0;
}

void SmoothTangent::PrepareAnalytic(const mjModel* m) {
  analytic_stages_++;
  forms_model_ = m;
  const mjData* d = stage_data_;
  const int nbody = m->nbody;
  const double* cdof = d->cdof;
  const double* cvel = d->cvel;

  // Newton-Euler at (v, a, gravity) and, for Euler's implicit damping, at (0, a - aint, 0):
  // accelerations, body forces, subtree forces
  const double* a = d->qacc;
  for (int pass = 0; pass < (integrator_.split() ? 2 : 1); pass++) {
    double* cacc = rne_.cacc + pass * 6 * nbody;
    double* cfrc = rne_.cfrc + pass * 6 * nbody;
    Zero6(cacc);
    if (pass == 0 && !mjDISABLED(mjDSBL_GRAVITY)) mju_scl3(cacc + 3, m->opt.gravity, -1);
    for (int b = 1; b < nbody; b++) {
      double* cb = cacc + 6 * b;
      Copy6(cb, cacc + 6 * m->body_parentid[b]);
      for (int j = m->body_dofadr[b]; j < m->body_dofadr[b] + m->body_dofnum[b]; j++) {
        if (pass == 0) {
          AddScl6(cb, d->cdof_dot + 6 * j, nominal_.qvel[j]);
          AddScl6(cb, cdof + 6 * j, a[j]);
        } else {
          AddScl6(cb, cdof + 6 * j, a[j] - integrator_.qacc[j]);
        }
      }
      double* fb = cfrc + 6 * b;
      MulInert(fb, d->cinert + 10 * b, cb);
      if (pass == 0) {
        double* iv = rne_.icvel + 6 * b;
        double t[6];
        MulInert(iv, d->cinert + 10 * b, cvel + 6 * b);
        CrossForce(t, cvel + 6 * b, iv);
        for (int q = 0; q < 6; q++) fb[q] += t[q];
      }
    }
    for (int b = nbody - 1; b > 0; b--) {
      if (m->body_parentid[b]) AddScl6(cfrc + 6 * m->body_parentid[b], cfrc + 6 * b, 1);
    }
  }

  // velocity and accelerations before each dof of a body (the part a perturbation leaves)
  const int nv = nv_;
  for (int b = 1; b < nbody; b++) {
    const int parent = m->body_parentid[b];
    double v[6], a0[6], a2[6];
    Copy6(v, cvel + 6 * parent);
    Copy6(a0, rne_.cacc + 6 * parent);
    Copy6(a2, rne_.cacc + 6 * nbody + 6 * parent);
    for (int j = m->body_dofadr[b]; j < m->body_dofadr[b] + m->body_dofnum[b]; j++) {
      Copy6(rne_.cvel_before_dof + 6 * j, v);
      Copy6(rne_.cacc_before_dof + 6 * j, a0);
      Copy6(rne_.cacc_before_dof + 6 * (nv + j), a2);
      AddScl6(v, cdof + 6 * j, nominal_.qvel[j]);
      AddScl6(a0, d->cdof_dot + 6 * j, nominal_.qvel[j]);
      AddScl6(a0, cdof + 6 * j, a[j]);
      if (integrator_.split()) AddScl6(a2, cdof + 6 * j, a[j] - integrator_.qacc[j]);
    }
  }

  // B w = I (w x v) + w x* (I v) + v x* (I w) of each body (row-major 6 x 6), summed over subtrees
  // (its right half zero: the sums run over the left half)
  double* bsub = rne_.subtree_bsub;
  for (int b = 1; b < nbody; b++) {
    double* B = bsub + 36 * b;
    if (closed_form_b_) {
      BodyB(d->cinert + 10 * b, cvel + 6 * b, rne_.icvel + 6 * b, B);
    } else {
      BodyBByColumns(d->cinert + 10 * b, cvel + 6 * b, rne_.icvel + 6 * b, B);
    }
  }
  for (int b = nbody - 1; b > 0; b--) {
    const int parent = m->body_parentid[b];
    if (parent == 0) continue;
    for (int r = 0; r < 36; r += 6) {
      for (int c = 0; c < 3; c++) bsub[36 * parent + r + c] += bsub[36 * b + r + c];
    }
  }

  if (stage_.has_rows) PrepareAnalyticRows(m);

  // per dof: crb cdof and Bsub' cdof of its body
  for (int j = 0; j < nv; j++) {
    const int b = m->dof_bodyid[j];
    const double* c = cdof + 6 * j;
    const double* B = bsub + 36 * b;
    MulInert(rne_.crb_cdof + 6 * j, d->crb + 10 * b, c);
    double* q = rne_.bsub_cdof + 6 * j;
    for (int i = 0; i < 3; i++) {
      q[i] = B[i] * c[0] + B[6 + i] * c[1] + B[12 + i] * c[2] + B[18 + i] * c[3] +
             B[24 + i] * c[4] + B[30 + i] * c[5];
      q[3 + i] = 0;
    }
    for (int r = 0; r < 6; r++) {
      rne_.crb_cdof_rows[r * nv + j] = rne_.crb_cdof[6 * j + r];
      rne_.bsub_cdof_rows[r * nv + j] = q[r];
    }
  }
}

void SmoothTangent::PrepareAnalyticRows(const mjModel* m) {
  const double* cdof = stage_data_->cdof;

  // contact rows: v+ of each body and before each dof (as cvel for v), no derivative yet, and the
  // side of each column
  const Problem& p = *stage_.problem;
  const double* vnext = stage_.solution->v_next;
  // (and at the problem's v_free, for the solvers' dJ v_free: set_jacobian_rows)
  for (int pass = 0; pass < (stage_.batch ? 1 : 2); pass++) {
    const double* x = pass == 0 ? vnext : p.v_free;
    double* cv = pass == 0 ? rne_.cvel_next : rne_.cvel_free;
    double* before = pass == 0 ? rne_.cvel_next_before_dof : rne_.cvel_free_before_dof;
    BodyVelocities(m, cdof, x, cv, before);
  }
  const SparseRows& J = p.J;
  mju_zero(tan_.dJ, J.nnz);
  mju_zero(tan_.dJ_vfree, p.nrow);
  mju_zero(tan_.dJ_w, p.nrow);
  mju_zero(tan_.dJ_x, p.nrow);
  for (int c = 0; c < p.ncon; c++) {
    const Contact& con = p.con[c];
    rows_.contact_dJ_written[c] = 0;
    int body = con.body[1];
    while (body > 0 && m->body_dofnum[body] == 0) body = m->body_parentid[body];
    const int last = body > 0 ? m->body_dofadr[body] + m->body_dofnum[body] - 1 : -1;
    for (int j = last; j >= 0; j = m->dof_parentid[j]) rows_.dof_marked[j] = 1;
    const int adr = J.rowadr[con.row];
    for (int q = 0; q < J.rownnz[con.row]; q++) {
      rows_.nonzero_side[adr + q] = rows_.dof_marked[J.colind[adr + q]] ? 1 : -1;
    }
    for (int j = last; j >= 0; j = m->dof_parentid[j]) rows_.dof_marked[j] = 0;
  }
}

void SmoothTangent::RneTangent(const mjModel* m, int k, double* dtau, double* dtau2) {
  // Moving dof k carries the subtree rigidly by S = cdof_k: carried axes, inertias and the
  // carried parts of velocities and accelerations change by S x, forces by S x*, and the terms
  // left are those of the part it does not carry, u (velocity) and a_u (acceleration) before the
  // carried dofs. With w = S x u and c = S x a_u - w x u, each body force changes by
  // S x* f - I c - B w, so a subtree's by S x* F - crb c - Bsub w, and the S terms cancel against
  // the carried axes in dtau = d(cdof . F)
  const mjData* d = stage_data_;
  const int nv = nv_, nbody = m->nbody;
  const double* S = d->cdof + 6 * k;
  const int b0 = m->dof_bodyid[k], s = rne_.dof_carry_start[k], end = rne_.subtree_dof_end[b0];
  const double* u = rne_.cvel_before_dof + 6 * s;
  const double* inert = d->crb + 10 * b0;
  const double* B = rne_.subtree_bsub + 36 * b0;
  mju_zero(dtau, nv);
  if (dtau2) mju_zero(dtau2, nv);
  for (int pass = 0; pass < (dtau2 ? 2 : 1); pass++) {
    double* out = pass == 0 ? dtau : dtau2;
    const double* au = rne_.cacc_before_dof + 6 * (pass * nv + s);
    double w[6], c[6];
    CarriedMotions(S, u, au, pass == 0, c, w);

    // carried dofs: -(crb cdof) . c - (Bsub' cdof) . w
    if (dof_rows_on_) {
      const double *C = rne_.crb_cdof_rows, *Bs = rne_.bsub_cdof_rows;
      const size_t n = nv;
      if (pass == 0) {
        PairLoop(s, end, [&](int j, auto z) {
          using V = decltype(z);
          StoreAt(out + j, -Dot6Of<V>(C, n, c, j) - Dot6Of<V>(Bs, n, w, j));
        });
      } else {
        PairLoop(s, end, [&](int j, auto z) {
          using V = decltype(z);
          StoreAt(out + j, -Dot6Of<V>(C, n, c, j) - 0.0);
        });
      }
    } else {
      for (int j = s; j < end; j++) {
        out[j] =
            -Dot6(rne_.crb_cdof + 6 * j, c) - (pass == 0 ? Dot6(rne_.bsub_cdof + 6 * j, w) : 0);
      }
    }

    // the others on the chain: cdof . dF of the subtree
    double dF[6], t[6];
    CrossForce(dF, S, rne_.cfrc + pass * 6 * nbody + 6 * b0);
    MulInert(t, inert, c);
    for (int r = 0; r < 6; r++) {
      dF[r] -= t[r];
      if (pass == 0) dF[r] -= Dot6(B + 6 * r, w);
    }
    for (int j = m->dof_parentid[s]; j >= 0; j = m->dof_parentid[j]) {
      out[j] = Dot6(d->cdof + 6 * j, dF);
    }
  }
}

void SmoothTangent::RneVelTangent(const mjModel* m, int k, double* dtau) {
  // velocity of dof k: every body of the subtree moves by C = cdof_k more, and the cdof_dot of
  // the later dofs by C x cdof_j; a body force changes by B C + I e with e = cdof_dot_k - C x U
  // (U the velocity before the later dofs), a subtree's by Bsub C + crb e
  const mjData* d = stage_data_;
  const int nv = nv_;
  const double* C = d->cdof + 6 * k;
  const int b0 = m->dof_bodyid[k], l = rne_.dof_cdot_start[k], end = rne_.subtree_dof_end[b0];
  const int bend = m->body_dofadr[b0] + m->body_dofnum[b0];
  const double* U = l < bend ? rne_.cvel_before_dof + 6 * l : d->cvel + 6 * b0;
  double e[6], t[6];
  CrossMotion(t, C, U);
  for (int r = 0; r < 6; r++) e[r] = d->cdof_dot[6 * k + r] - t[r];
  mju_zero(dtau, nv);
  if (dof_rows_on_) {
    const double *Cr = rne_.crb_cdof_rows, *Bs = rne_.bsub_cdof_rows;
    const size_t n = nv;
    PairLoop(m->body_dofadr[b0], end, [&](int j, auto z) {
      using V = decltype(z);
      StoreAt(dtau + j, Dot6Of<V>(Bs, n, C, j) + Dot6Of<V>(Cr, n, e, j));
    });
  } else {
    for (int j = m->body_dofadr[b0]; j < end; j++) {
      dtau[j] = Dot6(rne_.bsub_cdof + 6 * j, C) + Dot6(rne_.crb_cdof + 6 * j, e);
    }
  }
  const double* B = rne_.subtree_bsub + 36 * b0;
  double dF[6];
  MulInert(dF, d->crb + 10 * b0, e);
  for (int r = 0; r < 6; r++) dF[r] += Dot6(B + 6 * r, C);
  for (int j = m->dof_parentid[m->body_dofadr[b0]]; j >= 0; j = m->dof_parentid[j]) {
    dtau[j] = Dot6(d->cdof + 6 * j, dF);
  }
}

void SmoothTangent::MassTangent(const mjModel* m, int k, double* dM) {
  // M_ij = cdof_j . crb_i cdof_i (j an ancestor of i, crb_i the composite inertia of i's body).
  // Moving dof k carries its subtree rigidly (S = cdof_k): an entry between carried dofs does not
  // change, one between carried i and an uncarried ancestor j changes by cdof_j . S x* (crb
  // cdof_i), and one between uncarried i, j on the chain above by cdof_j . (S x* (crb_0 cdof_i) -
  // crb_0 (S x cdof_i)), crb_0 the composite inertia of the subtree
  const mjData* d = stage_data_;
  const double* S = d->cdof + 6 * k;
  const int b0 = m->dof_bodyid[k], s = rne_.dof_carry_start[k], end = rne_.subtree_dof_end[b0];
  const double* inert = d->crb + 10 * b0;
  double* sc = rne_.chain_motion;
  // dM zero but on the rows of the dM last formed (dM_listed_): those rows zeroed
  if (dM_listed_ && dM == tan_.dM) {
    MassRows(m, dM_formed_);
    for (int r = 0; r < tan_.dM_nrows; r++) {
      const int i = tan_.dM_rows[r];
      int adr = m->dof_Madr[i];
      dM[adr++] = 0;
      for (int j = m->dof_parentid[i]; j >= 0; j = m->dof_parentid[j]) dM[adr++] = 0;
    }
  } else {
    mju_zero(dM, nM_);
  }
  dM_listed_ = dM == tan_.dM;
  dM_formed_ = k;
  MassRows(m, k);
  for (int j = m->dof_parentid[s]; j >= 0; j = m->dof_parentid[j]) {
    CrossMotion(sc + 6 * j, S, d->cdof + 6 * j);
  }
  for (int i = s; i < end; i++) {
    int adr = m->dof_Madr[i] + 1;
    for (int j = m->dof_parentid[i]; j >= 0; j = m->dof_parentid[j], adr++) {
      if (j < s) dM[adr] = -Dot6(sc + 6 * j, rne_.crb_cdof + 6 * i);
    }
  }
  for (int i = m->dof_parentid[s]; i >= 0; i = m->dof_parentid[i]) {
    const double* ci = d->cdof + 6 * i;
    double t[6], g[6];
    MulInert(t, inert, ci);
    CrossForce(g, S, t);
    MulInert(t, inert, sc + 6 * i);
    for (int r = 0; r < 6; r++) g[r] -= t[r];
    int adr = m->dof_Madr[i];
    dM[adr++] = Dot6(ci, g);
    for (int j = m->dof_parentid[i]; j >= 0; j = m->dof_parentid[j], adr++) {
      dM[adr] = Dot6(d->cdof + 6 * j, g);
    }
  }
}

void SmoothTangent::MassRows(const mjModel* m, int k) {
  // the rows that can be nonzero, ascending: the chain above s (ancestors precede), then [s, end)
  const int s = rne_.dof_carry_start[k], end = rne_.subtree_dof_end[m->dof_bodyid[k]];
  int n = 0;
  for (int j = m->dof_parentid[s]; j >= 0; j = m->dof_parentid[j]) n++;
  tan_.dM_nrows = n + end - s;
  for (int j = m->dof_parentid[s]; j >= 0; j = m->dof_parentid[j]) tan_.dM_rows[--n] = j;
  for (int i = s, r = tan_.dM_nrows - (end - s); i < end; i++) tan_.dM_rows[r++] = i;
  tan_.dM_one_tree = true;
}

void SmoothTangent::FormMatrix(int k) {
  if (!(dM_listed_ && dM_formed_ == k)) MassTangent(forms_model_, k, tan_.dM);
}

void SmoothTangent::MassProduct(int k, const double* x, double scale, double* y) const {
  const mjModel* m = forms_model_;
  const mjData* d = stage_data_;
  const int s = rne_.dof_carry_start[k], end = rne_.subtree_dof_end[m->dof_bodyid[k]];
  double u[6] = {0, 0, 0, 0, 0, 0}, f[6] = {0, 0, 0, 0, 0, 0};
  for (int j = m->dof_parentid[s]; j >= 0; j = m->dof_parentid[j]) {
    AddScl6(u, d->cdof + 6 * j, x[j]);
  }
  for (int i = s; i < end; i++) AddScl6(f, rne_.crb_cdof + 6 * i, x[i]);
  MassProductOf(k, u, f, scale, y);
}

void SmoothTangent::MassVector(int k, int v, double scale, double* y) const {
  if (rne_.mass_terms_dof == k && mass_terms_on_) {
    // (MassVectors' terms: MassProductOf's adds)
    const mjModel* m = forms_model_;
    const int s = rne_.dof_carry_start[k], end = rne_.subtree_dof_end[m->dof_bodyid[k]];
    const double* t = rne_.mass_terms + v;
    for (int i = s; i < end; i++) y[i] -= scale * t[4 * i];
    for (int a = 0; a < rne_.mass_nchain; a++) {
      const int j = rne_.mass_chain[a];
      y[j] += scale * t[4 * j];
    }
    return;
  }
  const int at = 6 * (v * nv_ + rne_.dof_carry_start[k]);
  MassProductOf(k, rne_.mass_before + at, rne_.mass_carried + at, scale, y);
}

void SmoothTangent::MassProductOf(int k, const double* u, const double* f, double scale,
                                  double* y) const {
  const mjModel* m = forms_model_;
  const mjData* d = stage_data_;
  const double* S = d->cdof + 6 * k;
  const int b0 = m->dof_bodyid[k], s = rne_.dof_carry_start[k], end = rne_.subtree_dof_end[b0];
  const double* inert = d->crb + 10 * b0;
  double su[6], g[6], t[6];
  CrossMotion(su, S, u);
  if (dof_rows_on_) {
    const double* C = rne_.crb_cdof_rows;
    const size_t n = nv_;
    PairLoop(s, end, [&](int i, auto z) {
      using V = decltype(z);
      StoreAt(y + i, LoadAt<V>(y + i) - scale * Dot6Of<V>(C, n, su, i));
    });
  } else {
    for (int i = s; i < end; i++) y[i] -= scale * Dot6(su, rne_.crb_cdof + 6 * i);
  }
  // g = S x* (F + crb_b0 U) - crb_b0 (S x U)
  MulInert(t, inert, u);
  for (int r = 0; r < 6; r++) t[r] += f[r];
  CrossForce(g, S, t);
  MulInert(t, inert, su);
  for (int r = 0; r < 6; r++) g[r] -= t[r];
  for (int j = m->dof_parentid[s]; j >= 0; j = m->dof_parentid[j]) {
    y[j] += scale * Dot6(d->cdof + 6 * j, g);
  }
}

void SmoothTangent::FormTables(const double* w, int begin, int end, int root, int last,
                               double* before, double* carried) const {
  const mjModel* m = forms_model_;
  const mjData* d = stage_data_;
  auto wof = [&](int j) { return j >= begin && j < end ? w[j - begin] : 0.0; };
  // w's velocity of each body and before each dof (from the world's, zero)
  for (int b = root; b <= last; b++) {
    double v[6] = {0, 0, 0, 0, 0, 0};
    if (m->body_parentid[b] > 0) Copy6(v, rne_.form_body + 6 * m->body_parentid[b]);
    for (int j = m->body_dofadr[b]; j < m->body_dofadr[b] + m->body_dofnum[b]; j++) {
      Copy6(before + 6 * j, v);
      AddScl6(v, d->cdof + 6 * j, wof(j));
    }
    Copy6(rne_.form_body + 6 * b, v);
    Zero6(rne_.form_sub + 6 * b);
  }
  // the sums of w_i crb_i cdof_i over each dof, the dofs after it in its body and the subtrees
  for (int b = last; b >= root; b--) {
    double f[6];
    Copy6(f, rne_.form_sub + 6 * b);  // (its children's)
    for (int j = m->body_dofadr[b] + m->body_dofnum[b] - 1; j >= m->body_dofadr[b]; j--) {
      AddScl6(f, rne_.crb_cdof + 6 * j, wof(j));
      Copy6(carried + 6 * j, f);
    }
    if (m->body_parentid[b] > 0) AddScl6(rne_.form_sub + 6 * m->body_parentid[b], f, 1);
  }
}

void SmoothTangent::Forms(const double* w, int begin, int end, double* q) const {
  // MassTangent's entries of the carried rows, -(S x cdof_j) . crb_i cdof_i, sum to -2 (S x U) .
  // F; those of the chain above s, cdof_j . G cdof_i with G = S x* crb_b0 - crb_b0 S x
  // (symmetric), to U' G U = -2 (S x U) . crb_b0 U
  const mjModel* m = forms_model_;
  const mjData* d = stage_data_;
  const int root = m->body_rootid[m->dof_bodyid[begin]];
  FormTables(w, begin, end, root, rne_.subtree_last[root], rne_.form_before, rne_.form_carried);
  for (int k = begin; k < end; k++) {
    const int s = rne_.dof_carry_start[k];
    const double* u = rne_.form_before + 6 * s;
    double su[6], g[6];
    CrossMotion(su, d->cdof + 6 * k, u);
    MulInert(g, d->crb + 10 * m->dof_bodyid[k], u);
    for (int r = 0; r < 6; r++) g[r] += rne_.form_carried[6 * s + r];
    q[k - begin] = -2 * Dot6(su, g);
  }
}

namespace {

// FormsLanes' SIMD vector: a value of each of kFormLanes vectors (unaligned loads and stores)
typedef double Lanes __attribute__((vector_size(32), aligned(8)));
static_assert(sizeof(Lanes) == MassForms::kFormLanes * sizeof(double));

// Forms' tables and forms of n vectors in lanes, each lane's operations those of FormTables and
// Forms on its vector (tables: body, before, sub, carried in lanes)
CK_ALWAYS_INLINE void FormsLanesBody(const mjModel* m, const mjData* d, const RneWork& rne,
                                     const double* const* w, int n, int begin, int end, double* q,
                                     size_t ldq, double* tables) {
  Lanes* body = reinterpret_cast<Lanes*>(tables);
  Lanes* before = body + 6 * m->nbody;
  Lanes* sub = before + 6 * m->nv;
  Lanes* carried = sub + 6 * m->nbody;
  double* packed = reinterpret_cast<double*>(carried + 6 * m->nv);  // w lane by lane
  const int root = m->body_rootid[m->dof_bodyid[begin]], last = rne.subtree_last[root];
  constexpr int L = MassForms::kFormLanes;
  for (int j = begin; j < end; j++) {
    for (int l = 0; l < L; l++) packed[L * (j - begin) + l] = l < n ? w[l][j - begin] : 0.0;
  }
  // (one unconditional load from w's lanes or zeros: a conditional copy went through memory in
  // halves, whose vector load then stalled)
  static constexpr double kZeros[L] = {};
  auto wof = [&](int j, Lanes* x) {
    std::memcpy(x, j >= begin && j < end ? packed + L * (j - begin) : kZeros, sizeof(Lanes));
  };
  for (int b = root; b <= last; b++) {
    Lanes v[6] = {}, wj = {};
    if (m->body_parentid[b] > 0) {
      for (int r = 0; r < 6; r++) v[r] = body[6 * m->body_parentid[b] + r];
    }
    for (int j = m->body_dofadr[b]; j < m->body_dofadr[b] + m->body_dofnum[b]; j++) {
      for (int r = 0; r < 6; r++) before[6 * j + r] = v[r];
      wof(j, &wj);
      for (int r = 0; r < 6; r++) v[r] += wj * d->cdof[6 * j + r];
    }
    for (int r = 0; r < 6; r++) {
      body[6 * b + r] = v[r];
      sub[6 * b + r] = Lanes{};
    }
  }
  for (int b = last; b >= root; b--) {
    Lanes f[6], wj = {};
    for (int r = 0; r < 6; r++) f[r] = sub[6 * b + r];
    for (int j = m->body_dofadr[b] + m->body_dofnum[b] - 1; j >= m->body_dofadr[b]; j--) {
      wof(j, &wj);
      for (int r = 0; r < 6; r++) {
        f[r] += wj * rne.crb_cdof[6 * j + r];
        carried[6 * j + r] = f[r];
      }
    }
    if (m->body_parentid[b] > 0) {
      for (int r = 0; r < 6; r++) sub[6 * m->body_parentid[b] + r] += f[r];
    }
  }
  for (int k = begin; k < end; k++) {
    const int s = rne.dof_carry_start[k];
    const Lanes* u = before + 6 * s;
    const double* S = d->cdof + 6 * k;
    const double* I = d->crb + 10 * m->dof_bodyid[k];
    // spatial::CrossMotion(su, S, u), spatial::MulInert(g, I, u) + carried, -2 Dot6(su, g)
    const Lanes su[6] = {-S[2] * u[1] + S[1] * u[2],
                         S[2] * u[0] - S[0] * u[2],
                         -S[1] * u[0] + S[0] * u[1],
                         -S[2] * u[4] + S[1] * u[5] - S[5] * u[1] + S[4] * u[2],
                         S[2] * u[3] - S[0] * u[5] + S[5] * u[0] - S[3] * u[2],
                         -S[1] * u[3] + S[0] * u[4] - S[4] * u[0] + S[3] * u[1]};
    Lanes g[6] = {I[0] * u[0] + I[3] * u[1] + I[4] * u[2] - I[8] * u[4] + I[7] * u[5],
                  I[3] * u[0] + I[1] * u[1] + I[5] * u[2] + I[8] * u[3] - I[6] * u[5],
                  I[4] * u[0] + I[5] * u[1] + I[2] * u[2] - I[7] * u[3] + I[6] * u[4],
                  I[8] * u[1] - I[7] * u[2] + I[9] * u[3],
                  I[6] * u[2] - I[8] * u[0] + I[9] * u[4],
                  I[7] * u[0] - I[6] * u[1] + I[9] * u[5]};
    for (int r = 0; r < 6; r++) g[r] += carried[6 * s + r];
    const Lanes dot =
        (su[0] * g[0] + su[1] * g[1] + su[2] * g[2]) + (su[3] * g[3] + su[4] * g[4] + su[5] * g[5]);
    const Lanes qk = -2 * dot;
    for (int l = 0; l < n; l++) q[l * ldq + (k - begin)] = qk[l];
  }
}

#if CK_AVX2_CLONES
CK_TARGET_AVX2 void FormsLanesAvx2(const mjModel* m, const mjData* d, const RneWork& rne,
                                   const double* const* w, int n, int begin, int end, double* q,
                                   size_t ldq, double* tables) {
  FormsLanesBody(m, d, rne, w, n, begin, end, q, ldq, tables);
}
#endif

// MassProductOf's terms of the stage's kMassVectors vectors for dof k in lanes (lane v: vector
// v's, each lane's operations MassProductOf's): terms[4 i + v] the Dot6 of row i
CK_ALWAYS_INLINE void MassTermsBody(const mjModel* m, const mjData* d, const RneWork& rne, int k,
                                    double* terms) {
  const double* S = d->cdof + 6 * k;
  const int b0 = m->dof_bodyid[k], s = rne.dof_carry_start[k], end = rne.subtree_dof_end[b0];
  const double* inert = d->crb + 10 * b0;
  // (U and F of the three in lanes: PrepareMassVectors' mass_lanes; then MassProductOf's
  // operations on the lanes)
  const double *ul = rne.mass_lanes + 24 * static_cast<size_t>(s), *fl = ul + 24 * m->nv;
  Lanes u[6], f[6], su[6], t[6], g[6];
  for (int r = 0; r < 6; r++) {  // (one unaligned load each)
    std::memcpy(&u[r], ul + 4 * r, sizeof(Lanes));
    std::memcpy(&f[r], fl + 4 * r, sizeof(Lanes));
  }
  CrossMotion(su, S, u);
  MulInert(t, inert, u);
  for (int r = 0; r < 6; r++) t[r] += f[r];
  CrossForce(g, S, t);
  MulInert(t, inert, su);
  for (int r = 0; r < 6; r++) g[r] -= t[r];
  // (Dot6's order: the halves' Dot3 left to right, then their sum)
  auto dot = [](const double* c, const Lanes* x, double* out) {
    const Lanes t =
        (c[0] * x[0] + c[1] * x[1] + c[2] * x[2]) + (c[3] * x[3] + c[4] * x[4] + c[5] * x[5]);
    std::memcpy(out, &t, sizeof(Lanes));
  };
  for (int i = s; i < end; i++) dot(rne.crb_cdof + 6 * i, su, terms + 4 * i);
  for (int a = 0; a < rne.mass_nchain; a++) {
    const int j = rne.mass_chain[a];
    dot(d->cdof + 6 * j, g, terms + 4 * j);
  }
}

#if CK_AVX2_CLONES
CK_TARGET_AVX2 void MassTermsAvx2(const mjModel* m, const mjData* d, const RneWork& rne, int k,
                                  double* terms) {
  MassTermsBody(m, d, rne, k, terms);
}
#endif

}  // namespace

void SmoothTangent::FormsLanes(const double* const* w, int n, int begin, int end, double* q,
                               size_t ldq) const {
#if CK_AVX2_CLONES
  if (Avx2Kernels::On()) {
    return FormsLanesAvx2(forms_model_, stage_data_, rne_, w, n, begin, end, q, ldq,
                          rne_.form_lanes);
  }
#endif
  FormsLanesBody(forms_model_, stage_data_, rne_, w, n, begin, end, q, ldq, rne_.form_lanes);
}

void SmoothTangent::MassVectors(int k, double scale, double* y) {
  rne_.mass_terms_dof = -1;
  if (!mass_terms_on_) return MassVector(k, 0, scale, y);
  const mjModel* m = forms_model_;
  rne_.mass_nchain = 0;
  for (int j = m->dof_parentid[rne_.dof_carry_start[k]]; j >= 0; j = m->dof_parentid[j]) {
    rne_.mass_chain[rne_.mass_nchain++] = j;
  }
#if CK_AVX2_CLONES
  if (Avx2Kernels::On()) {
    MassTermsAvx2(forms_model_, stage_data_, rne_, k, rne_.mass_terms);
  } else {
    MassTermsBody(forms_model_, stage_data_, rne_, k, rne_.mass_terms);
  }
#else
  MassTermsBody(forms_model_, stage_data_, rne_, k, rne_.mass_terms);
#endif
  rne_.mass_terms_dof = k;
  MassVector(k, 0, scale, y);
}

void SmoothTangent::PrepareMassVectors() {
  rne_.mass_terms_dof = -1;
  // MassVector's tables: qacc, (v_free - v) / h, the integrator's qacc on every tree
  const mjModel* m = forms_model_;
  const Problem& p = *stage_.problem;
  for (int i = 0; i < nv_; i++) rne_.mass_x[i] = (p.v_free[i] - nominal_.qvel[i]) / p.h;
  const double* x[RneWork::kMassVectors] = {stage_data_->qacc, rne_.mass_x, integrator_.qacc};
  for (int v = 0; v < RneWork::kMassVectors; v++) {
    FormTables(x[v], 0, nv_, 1, m->nbody - 1, rne_.mass_before + 6 * v * nv_,
               rne_.mass_carried + 6 * v * nv_);
  }
  // (the same in lanes for MassVectors: U's 24 nv, then F's)
  static_assert(RneWork::kMassVectors == 3);
  double* lanes = rne_.mass_lanes;
  for (int h = 0; h < 2; h++) {
    const double* tab = h ? rne_.mass_carried : rne_.mass_before;
    for (int e = 0; e < 6 * nv_; e++, lanes += 4) {
      for (int v = 0; v < 3; v++) lanes[v] = tab[6 * v * nv_ + e];
      lanes[3] = 0;
    }
  }
}

void SmoothTangent::AnalyticVelocity(const mjModel* m, int k) {
  const int nv = nv_, na = na_;

  // -dbias/dv_k, joint damping, and the actuators on this dof (through their velocity)
  double* dtau = scratch_.b;
  RneVelTangent(m, k, dtau);
  for (int i = 0; i < nv; i++) tan_.dqfrc_smooth[i] = -dtau[i];
  mju_zero(tan_.dact_dot, na);
  VelocityLocalForces(m, k);
}

void SmoothTangent::VelocityLocalForces(const mjModel* m, int k) {
  // joint damping and the actuators on this dof (through their velocity), added to dqfrc_smooth
  if (!DampersDisabled(m)) tan_.dqfrc_smooth[k] -= m->dof_damping[k];
  if (rne_.dof_actuator_velocity[k]) {
    JointActuatorDifference(m, k, stage_data_->actuator_velocity);
  }
}

bool SmoothTangent::GeometryTangent(int i, double step, double dp[3], double dF[9],
                                    double* ddist) const {
  // centered differences if both nudges found contact i again, else one-sided
  int sides = pairs_.found[i];
  if (!sides) return false;
  const mjContact& g0 = pairs_.nominal[i];
  if (sides == 3) {
    // a point far faster on one side than on the other jumped there (a discontinuity of the
    // collider: MuJoCo 3.x's convex collision of the Allegro's ellipsoid resting on the palm moves
    // its point 1.9e-4 m and its depth 4.4e-8 m for a nudge of 1e-7 m one way, 1e-10 m the other
    // way): the other side's difference, the step's derivative on that side
    const double f = mju_dist3(pairs_.forward[i].pos, g0.pos);
    const double b = mju_dist3(g0.pos, pairs_.backward[i].pos);
    if (std::max(f, b) > kJumpRatio * std::min(f, b) && std::max(f, b) > kJumpRatio * step) {
      sides = f > b ? 2 : 1;
    }
  }
  const mjContact& up = sides & 1 ? pairs_.forward[i] : g0;
  const mjContact& down = sides & 2 ? pairs_.backward[i] : g0;
  const double w = (sides == 3 ? 0.5 : 1) / step;
  for (int r = 0; r < 3; r++) dp[r] = w * (up.pos[r] - down.pos[r]);
  for (int r = 0; r < 9; r++) dF[r] = w * (up.frame[r] - down.frame[r]);
  *ddist = w * (up.dist - down.dist);
  return true;
}

void SmoothTangent::PatchTangent(int i, double step, const Twist& t1, const Twist& t2, double dp[3],
                                 double dF[9], double* ddist) const {
  // no nudge found contact i again (its patch switched points on both sides, a tie, or the
  // pair's count changed): hold its point, a vertex of one geom (moving with it) on a face of
  // the other (the normal turns with it)
  const ContactPair& pr = pairs_.pair[pairs_.contact_pair[i]];
  const mjContact& g0 = pairs_.nominal[i];
  const Twist* tw[2] = {&t1, &t2};

  // a point of the same patch found again tells whose vertex it is, the normal's and the
  // shared depth's rates; without one the vertex is the faster geom's
  int sib = -1;
  double sdp[3] = {0, 0, 0}, sdF[9] = {0}, sdist = 0;
  for (int c = pr.first; c < pr.first + pr.count && sib < 0; c++) {
    if (GeometryTangent(c, step, sdp, sdF, &sdist)) sib = c;
  }
  double err[2], u[2][3];
  for (int b = 0; b < 2; b++) {
    double su[3];
    tw[b]->PointMotion(sib >= 0 ? pairs_.nominal[sib].pos : g0.pos, su);
    tw[b]->PointMotion(g0.pos, u[b]);
    err[b] = 0;
    for (int k = 0; k < 3; k++) {
      const double e = sib >= 0 ? sdp[k] - su[k] : su[k];
      err[b] += e * e;
    }
  }
  const int owner = sib >= 0 ? err[1] < err[0] : err[1] > err[0];

  // the point is midway between the vertex and the face: half the face's normal motion
  const double* n = g0.frame;
  const double half = 0.5 * (Dot3(n, u[owner]) - Dot3(n, u[1 - owner]));
  for (int k = 0; k < 3; k++) dp[k] = u[owner][k] - half * n[k];
  if (sib >= 0 && pairs_.nominal[sib].dist == g0.dist) {
    *ddist = sdist;
  } else {
    *ddist = Dot3(g0.frame, u[1]) - Dot3(g0.frame, u[0]);
  }
  if (sib >= 0) {
    mju_copy(dF, sdF, 9);
  } else {
    for (int a = 0; a < 3; a++) Cross3(dF + 3 * a, tw[1 - owner]->w, g0.frame + 3 * a);
  }
}

void SmoothTangent::EllipsoidRoll(const mjModel* m, int g, const double* n, const double* w,
                                  double* u) const {
  // the support point x + R (a o v / |v|), v = a o R'(-n) (a the radii), turning with R by w:
  // R'(-n) by R'(w x n), the point in the geom's frame by a o (I - v v' / |v|^2) dv / |v|
  const double* R = stage_data_->geom_xmat + 9 * g;
  const double* a = m->geom_size + 3 * g;
  const double mn[3] = {-n[0], -n[1], -n[2]};
  double wn[3], v[3], dv[3];
  Cross3(wn, w, n);
  ScaledLocal(R, a, mn, v);
  ScaledLocal(R, a, wn, dv);
  const double vv = Dot3(v, v), len = std::sqrt(vv), vdv = Dot3(v, dv);
  double ds[3];
  for (int k = 0; k < 3; k++) ds[k] = a[k] * (dv[k] - v[k] * vdv / vv) / len;
  for (int k = 0; k < 3; k++) u[k] += Dot3(R + 3 * k, ds);
}

void SmoothTangent::PlaneCylinderRim(const mjModel* m, const mjData* d, int g, const double* n,
                                     CylinderRim* rim) {
  const double* R = d->geom_xmat + 9 * g;
  const double r = m->geom_size[3 * g], half = m->geom_size[3 * g + 1];
  const double s = R[2] * n[0] + R[5] * n[1] + R[8] * n[2] > 0 ? -1 : 1;
  for (int k = 0; k < 3; k++) rim->a[k] = s * R[3 * k + 2];
  const double na = Dot3(n, rim->a);
  for (int k = 0; k < 3; k++) {
    rim->A[k] = half * rim->a[k];
    rim->p[k] = na * rim->a[k] - n[k];
  }
  rim->plen = std::sqrt(Dot3(rim->p, rim->p));
  for (int k = 0; k < 3; k++) rim->v[k] = r * rim->p[k] / rim->plen;
  Cross3(rim->e, rim->v, rim->A);
  rim->elen = std::sqrt(Dot3(rim->e, rim->e));
  const double side = r * std::sqrt(3.0) / 2 / rim->elen;
  for (int k = 0; k < 3; k++) rim->v1[k] = side * rim->e[k];
}

void SmoothTangent::CylinderPoint(const CylinderRim& rim, const double* x, int kind,
                                  double out[3]) {
  const double alpha = kind < 2 ? 1 : -0.5, beta = kind == 1 ? -1 : 1,
               gamma = kind == 2 ? 1 : (kind == 3 ? -1 : 0);
  for (int k = 0; k < 3; k++) {
    out[k] = x[k] + alpha * rim.v[k] + beta * rim.A[k] + gamma * rim.v1[k];
  }
}

void SmoothTangent::CylinderRoll(const mjModel* m, int g, const double* n, const double* w,
                                 int kind, double* u) const {
  // a turns by da = w x a, so p by dp = (n.da) a + (n.a) da and v by r (I - p p' / |p|^2) dp /
  // |p|; e by dv x A + v x (w x A) and v1 by r sqrt(3) / 2 (I - e e' / |e|^2) de / |e|; the
  // point's rigid motion has w x v and w x v1 of them
  CylinderRim rim;
  PlaneCylinderRim(m, stage_data_, g, n, &rim);
  const double r = m->geom_size[3 * g];
  double da[3], dp[3], t[3], dv[3], dA[3], de[3], c[3];
  Cross3(da, w, rim.a);
  const double nda = Dot3(n, da), na = Dot3(n, rim.a);
  for (int k = 0; k < 3; k++) {
    dp[k] = nda * rim.a[k] + na * da[k];
    t[k] = rim.p[k] / rim.plen;
  }
  UnitRate(t, dp, r / rim.plen, dv);
  const double alpha = kind < 2 ? 1 : -0.5, gamma = kind == 2 ? 1 : (kind == 3 ? -1 : 0);
  Cross3(c, w, rim.v);
  for (int k = 0; k < 3; k++) u[k] += alpha * (dv[k] - c[k]);
  if (gamma == 0) return;
  Cross3(dA, w, rim.A);
  Cross3(de, dv, rim.A);
  Cross3(c, rim.v, dA);
  for (int k = 0; k < 3; k++) {
    de[k] += c[k];
    t[k] = rim.e[k] / rim.elen;
  }
  double dv1[3];
  UnitRate(t, de, r * std::sqrt(3.0) / 2 / rim.elen, dv1);
  Cross3(c, w, rim.v1);
  for (int k = 0; k < 3; k++) u[k] += gamma * (dv1[k] - c[k]);
}

void SmoothTangent::ClosedTangent(const mjModel* m, int i, const Twist& t2, double dp[3],
                                  double dF[9], double* ddist) const {
  // MuJoCo's plane-sphere contact (a capsule's: each end's sphere; a box's: a corner, r = 0; an
  // ellipsoid's: its support point along -n, r = 0, EllipsoidRoll; a cylinder's: a rim or side
  // point of mjc_PlaneCylinder, r = 0, CylinderRoll) has the plane's normal n, the
  // distance n.(c - x_plane) - r from the sphere's center c, the point c - (dist / 2 + r) n, and
  // for a capsule the frame's tangent t = p / |p|, p = a - (n.a) n its axis a off the normal
  // (MakeFrame), the third axis n x t. The plane does not move (ClosedPair): along the twist t2
  // of the sphere's body c moves by u, dist by n.u, the point by u - (n.u / 2) n, a by w x a
  const mjContact& g0 = pairs_.nominal[i];
  const ContactPair& pr = pairs_.pair[pairs_.contact_pair[i]];
  const double* n = g0.frame;
  const int type = m->geom_type[pr.g2];
  const double r = type == mjGEOM_SPHERE || type == mjGEOM_CAPSULE ? m->geom_size[3 * pr.g2] : 0;
  double c[3], u[3];
  for (int k = 0; k < 3; k++) c[k] = g0.pos[k] + (0.5 * g0.dist + r) * n[k];
  t2.PointMotion(c, u);
  if (type == mjGEOM_ELLIPSOID) EllipsoidRoll(m, pr.g2, n, t2.w, u);
  if (type == mjGEOM_CYLINDER) {
    CylinderRoll(m, pr.g2, n, t2.w, pr.cylinder_point[i - pr.first], u);
  }
  const double dd = Dot3(n, u);
  for (int k = 0; k < 3; k++) dp[k] = u[k] - 0.5 * dd * n[k];
  *ddist = dd;
  for (int k = 0; k < 9; k++) dF[k] = 0;
  if (m->geom_type[pr.g2] != mjGEOM_CAPSULE) return;  // a sphere's or box's frame: from n alone

  // dt = (I - t t') dp / |p| with dp = da - (n.da) n
  const double* R = stage_data_->geom_xmat + 9 * pr.g2;
  const double a[3] = {R[2], R[5], R[8]};
  double da[3], p[3], q[3];
  Cross3(da, t2.w, a);
  const double na = Dot3(n, a), nda = Dot3(n, da);
  for (int k = 0; k < 3; k++) {
    p[k] = a[k] - na * n[k];
    q[k] = da[k] - nda * n[k];
  }
  const double len = std::sqrt(Dot3(p, p));
  const double* t = g0.frame + 3;
  UnitRate(t, q, (Dot3(t, p) < 0 ? -1 : 1) / len, dF + 3);
  Cross3(dF + 6, n, dF + 3);
}

void SmoothTangent::BodyPairTangent(const mjModel* m, int i, const Twist& t1, const Twist& t2,
                                    double dp[3], double dF[9], double* ddist) const {
  // PrepareBodyPair's nearest points c_g = x_g + s_g A_g move with their bodies (u_g) and, where
  // s_g is free, along A_g at the rate that keeps A_g.(c1 - c2) = 0; then with e = c2 - c1,
  // L = |e|, n = e / L: ddist = n.de, dn = (de - ddist n) / L, the point c1 + (r1 + dist / 2) n
  // moves by dc1 + (r1 + dist / 2) dn + (ddist / 2) n, and MakeFrame's tangent t = p / |p|,
  // p = t0 - (n.t0) n with its fixed t0, by (I - t t') dp / |p|, the third axis n x t
  const mjContact& g0 = pairs_.nominal[i];
  const ContactPair& pr = pairs_.pair[pairs_.contact_pair[i]];
  const mjData* d = stage_data_;
  const int geom[2] = {pr.g1, pr.g2};
  const double s[2] = {pr.s1, pr.s2};
  const Twist* tw[2] = {&t1, &t2};
  double A[2][3], dA[2][3], c[2][3], u[2][3];  // scaled axes, their rates, points, rigid motions
  for (int g = 0; g < 2; g++) {
    const double* R = d->geom_xmat + 9 * geom[g];
    const double len = m->geom_type[geom[g]] == mjGEOM_CAPSULE ? m->geom_size[3 * geom[g] + 1] : 0;
    for (int k = 0; k < 3; k++) {
      A[g][k] = len * R[3 * k + 2];
      c[g][k] = d->geom_xpos[3 * geom[g] + k] + s[g] * A[g][k];
    }
    Cross3(dA[g], tw[g]->w, A[g]);
    tw[g]->PointMotion(c[g], u[g]);
  }

  // the free parameters' rates: A_g.(c1 - c2) = 0 differentiated, f_g + A_g.(ds1 A1 - ds2 A2)
  const double e12[3] = {c[0][0] - c[1][0], c[0][1] - c[1][1], c[0][2] - c[1][2]};
  const double du[3] = {u[0][0] - u[1][0], u[0][1] - u[1][1], u[0][2] - u[1][2]};
  const double f1 = Dot3(dA[0], e12) + Dot3(A[0], du), f2 = Dot3(dA[1], e12) + Dot3(A[1], du);
  const double ma = Dot3(A[0], A[0]), mc = Dot3(A[1], A[1]), b = Dot3(A[0], A[1]);
  double ds1 = 0, ds2 = 0;
  if (pr.free1 && pr.free2) {
    const double det = b * b - ma * mc;
    ds1 = (f1 * mc - b * f2) / det;
    ds2 = (b * f1 - ma * f2) / det;
  } else if (pr.free1) {
    ds1 = -f1 / ma;
  } else if (pr.free2) {
    ds2 = f2 / mc;
  }

  // distance, normal and point
  const double* n = g0.frame;
  const double L = std::sqrt(Dot3(e12, e12)), r1 = m->geom_size[3 * pr.g1];
  double dc1[3], de[3];
  for (int k = 0; k < 3; k++) {
    dc1[k] = u[0][k] + ds1 * A[0][k];
    de[k] = u[1][k] + ds2 * A[1][k] - dc1[k];
  }
  const double dL = Dot3(n, de), arm = r1 + 0.5 * g0.dist;
  *ddist = dL;
  double* dn = dF;
  for (int k = 0; k < 3; k++) {
    dn[k] = (de[k] - dL * n[k]) / L;
    dp[k] = dc1[k] + arm * dn[k] + 0.5 * dL * n[k];
  }

  NormalFrameRate(g0.frame, dF);
}

void SmoothTangent::AnalyticPosition(const mjModel* m, int k) {
  mjData* d = stage_data_;
  const int nv = nv_, na = na_;

  // smooth forces: -d(M a + bias) + springs + actuators, with dM a folded in (the blocked path
  // and no rows) or dM itself and the force's own tangent (the solvers' force tangents)
  const bool with_dM = stage_.has_rows && !stage_.batch;
  double* dtau = scratch_.b;
  RneTangent(m, k, dtau,
             integrator_.split() && !with_dM ? tan_.dqderiv_qacc : nullptr);  // dM (a - aint)
  for (int i = 0; i < nv; i++) tan_.dqfrc_smooth[i] = -dtau[i];
  tan_.has_dM = with_dM;
  tan_.dM_lazy = with_dM && lazy_mass_;
  if (tan_.dM_lazy) {
    // dM a in closed form, dM itself formed where read (FormMatrix)
    MassRows(m, k);
    MassVectors(k, 1, tan_.dqfrc_smooth);  // (and the terms of MassVector(k, 1 and 2))
  }
  if (with_dM) {
    // dM is zero outside the tree of dof k
    const int t = extractor_.dof_tree()[k];
    tan_.dM_begin = trees_.dofadr[t];
    tan_.dM_end = trees_.dofadr[t] + trees_.dofnum[t];
    tan_.dM_dof = k;
  }
  if (with_dM && !tan_.dM_lazy) {
    MassTangent(m, k, tan_.dM);
    const double* a = d->qacc;
    for (int r = 0; r < tan_.dM_nrows; r++) {
      const int i = tan_.dM_rows[r];
      int adr = m->dof_Madr[i];
      tan_.dqfrc_smooth[i] += tan_.dM[adr++] * a[i];
      for (int j = m->dof_parentid[i]; j >= 0; j = m->dof_parentid[j], adr++) {
        tan_.dqfrc_smooth[i] += tan_.dM[adr] * a[j];
        tan_.dqfrc_smooth[j] += tan_.dM[adr] * a[i];
      }
    }
  }
  mju_zero(tan_.dact_dot, na);
  PositionLocalForces(m, k);
  if (stage_.has_rows) PositionRows(m, k);
}

void SmoothTangent::PositionLocalForces(const mjModel* m, int k) {
  // the hinge's or slide's spring and the actuators on this dof, added to dqfrc_smooth
  const int jnt = m->dof_jntid[k];
  if (!SpringsDisabled(m) && (m->jnt_type[jnt] == mjJNT_HINGE || m->jnt_type[jnt] == mjJNT_SLIDE)) {
    tan_.dqfrc_smooth[k] -= m->jnt_stiffness[jnt];
  }
  if (rne_.dof_actuator_length[k]) {
    // joint-transmission lengths move with the dof: difference mj_fwdActuation
    JointActuatorDifference(m, k, stage_data_->actuator_length);
  }
}

void SmoothTangent::PositionRows(const mjModel* m, int k, bool tangents) {
  // the rows' tangents along dof k: the contacts' geometry and Jacobians, the plain rows' gaps
  RecollideRigid(m, k);
  AnalyticContactRows(m, k);
  PlainRowGaps(k);
  tan_.has_dJ = tan_.has_dpos = tan_.has_dvel = tan_.has_dJ_force = true;
  if (tangents && row_impedance_) RowTangents(row_reference_);
}

void SmoothTangent::PlainRowGaps(int k) {
  // rows before the contacts: constant Jacobians (the scope; dJ zero from PrepareAnalytic), gaps
  // J dq
  const Problem& p = *stage_.problem;
  const SparseRows& J = p.J;
  ForRows(0, p.ne + p.nf + p.nl, [&](int i) {
    double g = 0;
    if (p.kind[i] != kRowFriction) {
      for (int q = 0; q < J.rownnz[i]; q++) {
        if (J.colind[J.rowadr[i] + q] == k) g = J.val[J.rowadr[i] + q];
      }
    }
    tan_.dpos[i] = g;
    tan_.dvel[i] = tan_.dJ_qvel_next[i] = 0;
    return 1;
  });
}

void SmoothTangent::RecollideRigid(const mjModel* m, int k) {
  mjData* d = stage_data_;
  const int b0 = m->dof_bodyid[k], last = rne_.subtree_last[b0];

  // contact pairs the subtree touches: collision on rigidly moved geom poses, forward and
  // backward (centered differences: a cylinder's patch slides along its rim at r / tilt, a
  // curvature that forward differences of the step would miss by 1e-4)
  const double* S = d->cdof + 6 * k;
  const double* com = d->subtree_com + 3 * m->body_rootid[b0];
  // (the bodies moved: the subtree's range, where the last one marked is cleared, not every body)
  if (pairs_.moved_first < 0) {
    for (int b = 0; b < m->nbody; b++) pairs_.body_moved[b] = b >= b0 && b <= last;
  } else if (pairs_.moved_first != b0) {
    for (int b = pairs_.moved_first; b <= pairs_.moved_last; b++) pairs_.body_moved[b] = 0;
    for (int b = b0; b <= last; b++) pairs_.body_moved[b] = 1;
  }
  pairs_.moved_first = b0;
  pairs_.moved_last = last;
  double Q[2][9];  // the rotations exp(+-e [S]x) of the two sides (every geom's)
  bool turned = false;
  pairs_.pass++;
  // the moved bodies' pairs (one whose bodies both moved: from its first)
  for (int b = b0; b <= last; b++) {
    for (int a = pairs_.body_pairadr[b]; a < pairs_.body_pairadr[b + 1]; a++) {
      const int q = pairs_.body_pair[a];
      const ContactPair& pr = pairs_.pair[q];
      if (b == pr.body2 && pr.body1 != b && pairs_.body_moved[pr.body1]) continue;
      if (ClosedPair(pr)) continue;                 // (ClosedTangent, BodyPairTangent)
      if (radj_.contacts && pr.reversed) continue;  // (ContactAdjoint's)
      if (TwistTangent(m, q, k, S, com)) continue;
      const int sides = pairs_.body_moved[pr.body1] | pairs_.body_moved[pr.body2] << 1;
      RecollideRigidPair(m, q, S, com, sides, Q, &turned);
      // (a free root owner's own dof: kept as its twist)
      const int owner = pr.owner ? pr.body2 : pr.body1;
      if (pr.owner >= 0 && m->dof_bodyid[k] == owner && FreeRoot(m, owner)) {
        KeepOwnerTangent(m, q, k - m->body_dofadr[owner]);
      }
    }
  }
}

bool SmoothTangent::TwistTangent(const mjModel* m, int q, int k, const double* S,
                                 const double* com) {
  ContactPair& pr = pairs_.pair[q];
  if (pr.owner < 0 || (pr.owner_mask & 64)) return false;
  const int owner = pr.owner ? pr.body2 : pr.body1, other = pr.owner ? pr.body1 : pr.body2;
  const bool by_owner = pairs_.body_moved[owner];
  if (by_owner == static_cast<bool>(pairs_.body_moved[other])) return false;
  if (by_owner && FreeRoot(m, owner)) {
    // a free root's own dof: its kept re-collision (KeepOwnerTangent) or one of OwnerTwists'
    if (!(pr.owner_mask & 1 << (k - m->body_dofadr[owner]))) return false;
  } else {
    if (pr.relative_check < 0) return false;
    if (pr.relative_check == 0) {
      pr.relative_check = OwnerTwists(m, q) ? 1 : -1;
      if (pr.relative_check < 0) return false;
    }
  }
  if (!CombineRelative(m, q, S, com, !by_owner, pairs_.relative_tan)) return false;
  pr.relative_pass = pairs_.pass;
  return true;
}

void SmoothTangent::KeepOwnerTangent(const mjModel* m, int q, int j) {
  // pair q's tangents along its owner's twist j (RecollideRigidPair's last), bit 6 of its mask
  // where a contact was not found on both nudges
  ContactPair& pr = pairs_.pair[q];
  for (int c = pr.first; c < pr.first + pr.count; c++) {
    double dp[3], dF[9], ddist;
    if (pairs_.found[c] != 3 || !GeometryTangent(c, kPoseStep, dp, dF, &ddist)) {
      pr.owner_mask |= 1 << 6;
      return;
    }
    double* o = pairs_.owner_tan + 42 * c + 7 * j;
    for (int r = 0; r < 3; r++) o[r] = dp[r], o[3 + r] = dF[r];
    o[6] = ddist;
  }
  pr.owner_mask |= 1 << j;
}

bool SmoothTangent::OwnerTwists(const mjModel* m, int q) {
  // the owner's six twists not yet kept (a free root's dofs, else unit twists about its tree's
  // centre) re-collided, then the combination checked along each side's dofs summed (a free
  // root's own dofs are its twists: not checked)
  ContactPair& pr = pairs_.pair[q];
  const mjData* d = stage_data_;
  const int owner = pr.owner ? pr.body2 : pr.body1, other = pr.owner ? pr.body1 : pr.body2;
  const int side = pr.owner ? 2 : 1;  // the owner's geom (RecollideRigidPair's sides)
  const bool free = FreeRoot(m, owner);
  const double* oc = d->subtree_com + 3 * m->body_rootid[owner];
  const int changes = mode_changes_;
  for (int j = 0; j < 6 && !(pr.owner_mask & 64); j++) {
    if (pr.owner_mask & 1 << j) continue;
    double unit[6] = {0, 0, 0, 0, 0, 0}, Q[2][9];
    unit[j] = 1;
    bool turned = false;
    RecollideRigidPair(m, q, free ? d->cdof + 6 * (m->body_dofadr[owner] + j) : unit, oc, side, Q,
                       &turned);
    KeepOwnerTangent(m, q, j);
  }
  bool ok = !(pr.owner_mask & 64);
  ok = ok && (free || RelativeCheck(m, q, owner, side));
  ok = ok && (ChainDofs(m, other) == 0 || RelativeCheck(m, q, other, 3 - side));
  mode_changes_ = changes;
  return ok;
}

bool SmoothTangent::CombineRelative(const mjModel* m, int q, const double* S, const double* com,
                                    bool other, double* out) const {
  const ContactPair& pr = pairs_.pair[q];
  double a[6];
  if (!TwistCoefficients(m, q, S, com, a)) return false;
  for (int c = pr.first; c < pr.first + pr.count; c++) {
    CombineContact(c, a, S, com, other, out + 13 * c);
  }
  return true;
}

bool SmoothTangent::TwistCoefficients(const mjModel* m, int q, const double* S, const double* com,
                                      double a[6]) const {
  // S = sum a_j T_j over the owner's twists: S moved to its tree's centre, a free root's dofs
  // solved for
  const ContactPair& pr = pairs_.pair[q];
  const int owner = pr.owner ? pr.body2 : pr.body1;
  const mjData* d = stage_data_;
  const double* oc = d->subtree_com + 3 * m->body_rootid[owner];
  const double off[3] = {oc[0] - com[0], oc[1] - com[1], oc[2] - com[2]};
  double wo[3];
  Cross3(wo, S, off);
  for (int r = 0; r < 3; r++) a[r] = S[r], a[3 + r] = S[3 + r] + wo[r];
  if (!FreeRoot(m, owner)) return true;
  ContactPair& pair = pairs_.pair[q];
  if (!pair.lu_ready) {
    mju_copy(pair.lu, d->cdof + 6 * m->body_dofadr[owner], 36);  // (column-major: column j dof j)
    if (!LuFactor(pair.lu, 6, pair.piv)) return false;
    pair.lu_ready = true;
  }
  LuSolve(pair.lu, pair.piv, 6, a);
  return true;
}

void SmoothTangent::CombineContact(int c, const double a[6], const double* S, const double* com,
                                   bool other, double t[13]) const {
  // along the owner's twist s = sum a_j T_j the tangent is sum a_j G_j; the pair's geometry
  // G(P1, P2) is carried by a common rigid motion g: G(g P1, g P2) = g G, so along the other
  // side's twist s it is s's rigid motion of the contact less the owner's along s
  const mjContact& g0 = pairs_.nominal[c];
  const double sign = other ? -1 : 1;
  if (other) {
    Twist tw;
    for (int r = 0; r < 3; r++) tw.w[r] = S[r], tw.v[r] = S[3 + r], tw.o[r] = com[r];
    tw.PointMotion(g0.pos, t);
    Cross3(t + 3, tw.w, g0.frame);
  } else {
    for (int r = 0; r < 6; r++) t[r] = 0;
  }
  t[12] = 0;
  for (int j = 0; j < 6; j++) {
    const double* o = pairs_.owner_tan + 42 * c + 7 * j;
    const double aj = sign * a[j];
    for (int r = 0; r < 3; r++) t[r] += aj * o[r], t[3 + r] += aj * o[3 + r];
    t[12] += aj * o[6];
  }
  NormalFrameRate(g0.frame, t + 3);
}

bool SmoothTangent::RelativeCheck(const mjModel* m, int q, int body, int side) {
  // the combination along the sum s of body's dofs against the pair re-collided along s (its
  // side's geom moved): a tie of the collider (two boxes' parallel faces, whose normal is either
  // box's) or a collider whose answer is not carried by the common motion to its tolerance (its
  // iterates) is not combined (1e-6 of the tangent)
  const ContactPair& pr = pairs_.pair[q];
  const mjData* d = stage_data_;
  double s[6] = {0, 0, 0, 0, 0, 0};
  for (int b = body; b > 0; b = m->body_parentid[b]) {
    for (int j = 0; j < m->body_dofnum[b]; j++)
      AddScl6(s, d->cdof + 6 * (m->body_dofadr[b] + j), 1);
  }
  const double* com = d->subtree_com + 3 * m->body_rootid[body];
  const int owner = pr.owner ? pr.body2 : pr.body1;
  double* want = pairs_.relative_tan;
  if (!CombineRelative(m, q, s, com, body != owner, want)) return false;
  double Q[2][9];
  bool turned = false;
  RecollideRigidPair(m, q, s, com, side, Q, &turned);
  for (int c = pr.first; c < pr.first + pr.count; c++) {
    double got[13];
    if (pairs_.found[c] != 3 || !GeometryTangent(c, kPoseStep, got, got + 3, got + 12)) {
      return false;
    }
    double err = 0, size = 0;
    for (int r = 0; r < 13; r++) {
      err = std::max(err, std::abs(got[r] - want[13 * c + r]));
      size = std::max(size, std::abs(got[r]));
    }
    if (err > kRelativeTol * (1 + size)) return false;
  }
  return true;
}

void SmoothTangent::RecollideRigidPair(const mjModel* m, int q, const double* S, const double* com,
                                       int sides, double Q[2][9], bool* turned) {
  mjData* d = stage_data_;
  const ContactPair& pr = pairs_.pair[q];
  double saved[2][12];
  for (int g = 0; g < 2; g++) {
    const int geom = g == 0 ? pr.g1 : pr.g2;
    if (!(sides & (1 << g))) continue;
    mju_copy3(saved[g], d->geom_xpos + 3 * geom);
    mju_copy(saved[g] + 3, d->geom_xmat + 9 * geom, 9);
  }
  for (int c = pr.first; c < pr.first + pr.count; c++) pairs_.found[c] = 0;
  if (!*turned) {
    Rotation(S, kPoseStep, Q[0]);
    Rotation(S, -kPoseStep, Q[1]);
    *turned = true;
  }
  for (int side = 0; side < 2; side++) {
    const double e = side == 0 ? kPoseStep : -kPoseStep;
    for (int g = 0; g < 2; g++) {
      const int geom = g == 0 ? pr.g1 : pr.g2;
      if (!(sides & (1 << g))) continue;
      double* pos = d->geom_xpos + 3 * geom;
      double* mat = d->geom_xmat + 9 * geom;

      // x = c + Q (x - c) + e v, R = Q R with Q = exp(e [w]x)
      const double* Qs = Q[side];
      double r[3];
      mju_sub3(r, saved[g], com);
      for (int i = 0; i < 3; i++) pos[i] = com[i] + Dot3(Qs + 3 * i, r) + e * S[3 + i];
      for (int i = 0; i < 3; i++) {
        for (int c = 0; c < 3; c++) {
          mat[3 * i + c] = 0;
          for (int a = 0; a < 3; a++) mat[3 * i + c] += Qs[3 * i + a] * saved[g][3 + 3 * a + c];
        }
      }
    }
    mjContact* out = side == 0 ? pairs_.forward : pairs_.backward;
    if (!RecollidePair(m, d, q, kPoseStep, 1 << side, out)) mode_changes_++;
  }
  for (int g = 0; g < 2; g++) {
    const int geom = g == 0 ? pr.g1 : pr.g2;
    if (!(sides & (1 << g))) continue;
    mju_copy3(d->geom_xpos + 3 * geom, saved[g]);
    mju_copy(d->geom_xmat + 9 * geom, saved[g] + 3, 9);
  }
}

void SmoothTangent::ContactAxisTangents(const mjModel* m, const Contact& con, const mjContact& g0,
                                        const double dp[3], const double dF[9], const double* S,
                                        double tan[2][2][6][6]) const {
  const mjData* d = stage_data_;
  const int dim = con.dim;

  // per side and row: d rho (uncarried dofs) and d rho - S x* rho (carried)
  for (int side = 0; side < 2; side++) {
    const int body = con.body[side];
    if (m->body_weldid[body] == 0) continue;  // a static side has no columns (its tan unset)
    const double* com = d->subtree_com + 3 * m->body_rootid[body];
    const double off[3] = {g0.pos[0] - com[0], g0.pos[1] - com[1], g0.pos[2] - com[2]};
    for (int r = 0; r < dim; r++) {
      const int ax = r < 3 ? r : r - 3;
      const double* Fr = g0.frame + 3 * ax;
      const double* dFr = dF + 3 * ax;
      double rho[6], t[3], u[3];
      double* a = tan[side][0][r];
      if (r < 3) {
        Cross3(rho, off, Fr);
        for (int i = 0; i < 3; i++) rho[3 + i] = Fr[i];
        Cross3(t, dp, Fr);
        Cross3(u, off, dFr);
        for (int i = 0; i < 3; i++) {
          a[i] = t[i] + u[i];
          a[3 + i] = dFr[i];
        }
      } else {
        for (int i = 0; i < 3; i++) {
          rho[i] = Fr[i];
          rho[3 + i] = 0;
          a[i] = dFr[i];
          a[3 + i] = 0;
        }
      }
      if (pairs_.body_moved[body]) {
        double sr[6];
        CrossForce(sr, S, rho);
        for (int i = 0; i < 6; i++) tan[side][1][r][i] = a[i] - sr[i];
      }
    }
  }
}

void SmoothTangent::ContactGeometry(const mjModel* m, int i, const double* S, const double* com,
                                    double dp[3], double dF[9], double* ddist) const {
  // both bodies that move turn with S about the subtree's center
  const ContactPair& pr = pairs_.pair[pairs_.contact_pair[i]];
  Twist tw[2];
  for (int side = 0; side < 2; side++) {
    const bool moved = pairs_.body_moved[side ? pr.body2 : pr.body1];
    for (int r = 0; r < 3; r++) {
      tw[side].w[r] = moved ? S[r] : 0;
      tw[side].v[r] = moved ? S[3 + r] : 0;
      tw[side].o[r] = com[r];
    }
  }
  if (pr.relative_pass == pairs_.pass) {
    const double* t = pairs_.relative_tan + 13 * i;
    mju_copy3(dp, t);
    mju_copy(dF, t + 3, 9);
    *ddist = t[12];
  } else if (ClosedPair(pr) && pr.bodies) {
    BodyPairTangent(m, i, tw[0], tw[1], dp, dF, ddist);
  } else if (ClosedPair(pr)) {
    ClosedTangent(m, i, tw[1], dp, dF, ddist);
  } else if (!GeometryTangent(i, kPoseStep, dp, dF, ddist)) {
    PatchTangent(i, kPoseStep, tw[0], tw[1], dp, dF, ddist);
  } else if (pairs_.found[i] != 3) {
    // found on one side only: the nominal pose is a tie of the patch, where the collider's
    // distance need not be continuous (MuJoCo 3.x's plane-cylinder holds a cap tilted less
    // than about 1e-8 flat). The distance's rate is the normal motion of the point's bodies
    const mjContact& g0 = pairs_.nominal[i];
    double u[2][3];
    for (int side = 0; side < 2; side++) tw[side].PointMotion(g0.pos, u[side]);
    *ddist = Dot3(g0.frame, u[1]) - Dot3(g0.frame, u[0]);
  }
}

void SmoothTangent::AnalyticContactRows(const mjModel* m, int k) {
  mjData* d = stage_data_;
  const int nv = nv_;
  const int b0 = m->dof_bodyid[k];
  const int carry = rne_.dof_carry_start[k],
            carry_end = rne_.subtree_dof_end[b0];  // dofs it carries
  const double* S = d->cdof + 6 * k;
  const double* com = d->subtree_com + 3 * m->body_rootid[b0];

  // contact rows: J_rj = sign rho_r . cdof_j with rho_r = [off x F_r; F_r] (rotation rows
  // [F_r; 0]), off the point from the side's tree center; along S the point and frame move as the
  // collision says and the carried axes by S x, so d J_rj = sign (d rho_r - [j carried] S x* rho_r)
  // . cdof_j, written into the row with d(J v), d(J v+) and dJ' f of the same pass
  const Problem& p = *stage_.problem;
  const SparseRows& J = p.J;
  const double* vnext = stage_.solution->v_next;
  const double* force = stage_.solution->force;
  double* dJf = tan_.dJ_force;
  if (!ZeroAdjointForce(dJf)) mju_zero(dJf, nv);       // (the reverse pass: on an island's dofs)
  const double* u = rne_.cvel_before_dof + 6 * carry;  // velocity and v+ before the carried dofs
  const double* un = rne_.cvel_next_before_dof + 6 * carry;
  tan_.has_dJ_vfree = jac_rows_ != nullptr;
  if (product_y()) mju_zero(tan_.dJ_y, nv);
  // the blocked path's dJ' f: consecutive contacts on the same bodies (the same columns and
  // sides: MuJoCo's rows of one body pair) sum their wrenches, then one pass over the columns
  // (and with the solver's y, y's wrenches into group[1]: ProductTerms)
  double group[2][2][2][6];
  int group_row = -1;
  // (dJ x's rows and y's wrenches only for a solver that gives x or y: lean_products_on_)
  const bool with_x = product_x() || !lean_products_on_, with_y = product_y() || !lean_products_on_;
  auto same_columns = [&](int row, const Contact& con) {
    if (group_row < 0) return false;
    const Contact& g = p.con[rows_.row_contact[group_row]];
    const int n = J.rownnz[row];
    return g.body[0] == con.body[0] && g.body[1] == con.body[1] && J.rownnz[group_row] == n &&
           std::equal(J.colind + J.rowadr[row], J.colind + J.rowadr[row] + n,
                      J.colind + J.rowadr[group_row]);
  };
  auto flush_group = [&]() {
    WrenchColumns(group_row, carry, carry_end, group[0], dJf);
    if (product_y()) WrenchColumns(group_row, carry, carry_end, group[1], tan_.dJ_y);
  };
  // (the contacts of the direction's island, UnitTangent; the others hold zeros)
  ForRows(p.ne + p.nf + p.nl, p.nrow, [&](int row) {
    const int c = rows_.row_contact[row];
    if (c < 0) return 1;
    const Contact& con = p.con[c];
    const int dim = con.dim;
    for (int r = 0; r < dim; r++)
      tan_.dpos[row + r] = tan_.dvel[row + r] = tan_.dJ_qvel_next[row + r] = 0;
    for (int r = 0; r < dim && jac_rows_; r++) tan_.dJ_vfree[row + r] = tan_.dJ_w[row + r] = 0;
    for (int r = 0; r < dim && with_x; r++) tan_.dJ_x[row + r] = 0;
    for (int i = 0; i < 6; i++) tan_.dframe[6 * c + i] = 0;
    if (radj_.contacts && radj_.contact_rev[c]) return dim;  // (ContactAdjoint's)
    if (!pairs_.body_moved[con.body[0]] && !pairs_.body_moved[con.body[1]]) {
      if (!stage_.batch && rows_.contact_dJ_written[c]) {
        for (int r = 0; r < dim; r++) mju_zero(tan_.dJ + J.rowadr[row + r], J.rownnz[row + r]);
        rows_.contact_dJ_written[c] = 0;
      }
      return dim;
    }
    rows_.contact_dJ_written[c] = 1;
    const mjContact& g0 = pairs_.nominal[con.mj_index];
    double dp[3], dF[9], ddist;
    ContactGeometry(m, con.mj_index, S, com, dp, dF, &ddist);
    for (int i = 0; i < 6; i++) tan_.dframe[6 * c + i] = dF[3 + i];
    tan_.dpos[row] = ddist;

    // (the blocked rows' sums from the point and frame tangents alone where the solver reads no
    // dJ of the contact's rows: PointRows; else each row's 6-vector tangents)
    // (or where each row whose dJ it reads is weighted and read as dJ_i w_i: weighted_points_on_)
    bool point_rows = PointRowsApply(row, dim);
    double tan[2][2][6][6];
    if (!point_rows) ContactAxisTangents(m, con, g0, dp, dF, S, tan);

    // the blocked path needs only dJ v, dJ v+ and dJ' f: chain sums of cdof v are body velocities
    // (V, from u before the carried dofs), and the rows combine with their forces first; so does
    // a solver that reads dJ v_free and dJ of some rows only (jac_rows_)
    const int adr0 = J.rowadr[row], n = J.rownnz[row];
    if (stage_.batch || jac_rows_) {
      double wrench[2][2][2][6];  // f's wrenches, [1] y's (only with y: ProductTerms)
      if (with_y)
        std::memset(wrench, 0, sizeof(wrench));
      else if (!point_rows)  // (PointRows writes f's)
        std::memset(wrench[0], 0, sizeof(wrench[0]));
      if (point_rows) PointRows(m, con, row, g0, dp, dF, S, carry, wrench);
      for (int side = 0; side < 2 && !point_rows; side++) {
        const int body = con.body[side];
        if (m->body_weldid[body] == 0) continue;  // (static: no velocity, no columns)
        const double sg = side ? 1 : -1;
        const bool carried = pairs_.body_moved[body];
        const double* V = d->cvel + 6 * body;
        const double* Vn = rne_.cvel_next + 6 * body;
        for (int r = 0; r < dim; r++) {
          const double* a = tan[side][0][r];
          const double fr = force[row + r];
          if (!row_reference_) {  // (f's wrenches only)
            for (int i = 0; i < 6 && carried; i++) wrench[0][side][1][i] += fr * tan[side][1][r][i];
          } else if (carried) {
            const double* b = tan[side][1][r];
            double dv = Dot6(a, u), dn = Dot6(a, un);
            for (int i = 0; i < 6; i++) {
              dv += b[i] * (V[i] - u[i]);
              dn += b[i] * (Vn[i] - un[i]);
              wrench[0][side][1][i] += fr * b[i];
            }
            tan_.dvel[row + r] += sg * dv;
            tan_.dJ_qvel_next[row + r] += sg * dn;
          } else {
            tan_.dvel[row + r] += sg * Dot6(a, V);
            tan_.dJ_qvel_next[row + r] += sg * Dot6(a, Vn);
          }
          for (int i = 0; i < 6; i++) wrench[0][side][0][i] += fr * a[i];
        }
      }
      if (row_products_ && !point_rows) ProductTerms(m, con, row, carry, tan, wrench[1]);
      if (same_columns(row, con) && group_wrenches_) {
        for (int q = 0; q < 24; q++) (&group[0][0][0][0])[q] += (&wrench[0][0][0][0])[q];
        for (int q = 0; q < 24 && with_y; q++) (&group[1][0][0][0])[q] += (&wrench[1][0][0][0])[q];
      } else {
        if (group_row >= 0) flush_group();
        if (with_y)
          std::memcpy(group, wrench, sizeof(group));
        else
          std::memcpy(group[0], wrench[0], sizeof(group[0]));
        group_row = row;
      }
      if (jac_rows_ && !point_rows) SolverRowTerms(m, con, row, carry, carry_end, tan, jac_vfree_);
      return dim;
    }

    // the row's columns: each on one side's chain (dofs on both cancel)
    double dvel[6] = {0, 0, 0, 0, 0, 0}, djv[6] = {0, 0, 0, 0, 0, 0};
    for (int q = 0; q < n; q++) {
      const int j = J.colind[adr0 + q];
      const int sign = rows_.nonzero_side[adr0 + q];
      const double(*vec)[6] = tan[sign > 0][j >= carry && j < carry_end];
      const double* cd = d->cdof + 6 * j;
      double fj = 0;
      for (int r = 0; r < dim; r++) {
        const double val = sign * Dot6(vec[r], cd);
        tan_.dJ[J.rowadr[row + r] + q] = val;
        dvel[r] += val * nominal_.qvel[j];
        djv[r] += val * vnext[j];
        fj += val * force[row + r];
      }
      dJf[j] += fj;
    }
    for (int r = 0; r < dim; r++) {
      tan_.dvel[row + r] = dvel[r];
      tan_.dJ_qvel_next[row + r] = djv[r];
    }
    return dim;
  });
  if (group_row >= 0) flush_group();
}

bool SmoothTangent::PointRowsApply(int row, int dim) const {
  if (!stage_.batch && !jac_rows_) return false;
  bool read = false, weighted = true;  // (a row's dJ read; every read row weighted)
  const char* w = jac_vfree_ ? row_weights() : nullptr;
  for (int r = 0; r < dim && jac_rows_; r++) {
    read = read || jac_rows_[row + r];
    weighted = weighted && (!jac_rows_[row + r] || (w && w[row + r]));
  }
  return read ? weighted_points_on_ && weighted : point_rows_on_;
}

void SmoothTangent::PointRows(const mjModel* m, const Contact& con, int row, const mjContact& g0,
                              const double dp[3], const double dF[9], const double* S, int carry,
                              double (*wrench)[2][2][6]) {
  // a_r = [dp x F_r + off x dF_r; dF_r] (rotation rows [dF_r; 0]), b_r = a_r - S x* rho_r: a_r . V
  // = F_r . (V_w x dp) + dF_r . (V_v + V_w x off), and b_r's carried part -(S x* rho_r) . (V - u)
  // = rho_r . (S x (V - u)) = F_r . (m_v + m_w x off) (rotation rows F_r . m_w), m = S x (V - u);
  // the wrenches sum f_r a_r and sum f_r b_r = sum f_r a_r - S x* sum f_r rho_r in 3-vectors
  const mjData* d = stage_data_;
  const size_t c6 = 6 * static_cast<size_t>(carry);
  // the velocity sums read: each body's velocity, the velocity before the carried dofs, the rows'
  // output (dJ v, dJ v+, dJ v_free, dJ x); the weights of the wrenches (f, y)
  const double* body_vel[4];
  const double* before[4];
  double* out[4];
  int nch = 0;
  auto channel = [&](const double* V, const double* u, double* o) {
    body_vel[nch] = V;
    before[nch] = u;
    out[nch++] = o;
  };
  if (row_reference_) {
    channel(d->cvel, rne_.cvel_before_dof + c6, tan_.dvel);
    channel(rne_.cvel_next, rne_.cvel_next_before_dof + c6, tan_.dJ_qvel_next);
  }
  if (jac_vfree_) channel(rne_.cvel_free, rne_.cvel_free_before_dof + c6, tan_.dJ_vfree);
  if (row_products_ && rows_.product_x)
    channel(rows_.product_cvel, rows_.product_before + c6, tan_.dJ_x);
  const double* weight[2] = {stage_.solution->force, row_products_ ? rows_.product_y : nullptr};
  for (int side = 0; side < 2; side++) {
    const int body = con.body[side];
    const bool carried = pairs_.body_moved[body], fixed = m->body_weldid[body] == 0;
    for (int w = 0; w < 2 && weight[w]; w++) {
      if (!carried || fixed) Zero6(wrench[w][side][1]);
      if (fixed) Zero6(wrench[w][side][0]);
    }
    if (fixed) continue;  // (static: no velocity, no columns)
    const double sg = side ? 1 : -1;
    const double* com = d->subtree_com + 3 * m->body_rootid[body];
    const double off[3] = {g0.pos[0] - com[0], g0.pos[1] - com[1], g0.pos[2] - com[2]};
    const PointSide ps = {body, con.dim, row, sg, carried ? S : nullptr, off, dp, dF, g0.frame};
    switch (nch) {  // (the channels' loops unrolled)
      case 0:
        break;
      case 1:
        PointVelocities<1>(ps, body_vel, before, out);
        break;
      case 2:
        PointVelocities<2>(ps, body_vel, before, out);
        break;
      case 3:
        PointVelocities<3>(ps, body_vel, before, out);
        break;
      default:
        PointVelocities<4>(ps, body_vel, before, out);
    }
    // the weighted rows' dJ_i w_i at w_i's velocities (SolverRowTerms', with dJ v_free)
    const char* weighted = jac_vfree_ ? row_weights() : nullptr;
    for (int r = 0; r < con.dim && weighted; r++) {
      if (!weighted[row + r]) continue;
      const double* Vw = rows_.weight_body + 12 * (row + r) + 6 * side;
      double c[3], pt[3], mw[3] = {};
      PointChannel(ps, Vw, rows_.weight_before + rows_.weight_adr[row + r] + c6, c, pt, mw);
      tan_.dJ_w[row + r] += sg * PointRowDot(ps, r, Vw, c, pt, mw);
    }
    for (int w = 0; w < 2 && weight[w]; w++) PointWrench(ps, weight[w], wrench[w][side]);
  }
}

void SmoothTangent::set_jacobian_rows(const mjModel* m, const char* rows) {
  jac_rows_ = jacobian_rows_on_ ? rows : nullptr;
  jac_vfree_ = jac_rows_ && stage_.solver->ReadsJacobianFreeVelocity();
  row_impedance_ = !jac_rows_ || stage_.solver->ReadsRowImpedance(*stage_.problem);
  row_reference_ = !jac_rows_ || !velocity_rows_unread_ || !reference_unread_on_ ||
                   stage_.solver->ReadsRowVelocity() || stage_.solver->ReadsJacobianProducts();
  row_weights_ = false;
  row_weights_ = jac_vfree_ && row_weights_on_ && PrepareRowWeights(m);
  row_products_ = jac_rows_ && PrepareRowProducts(m);
}

bool SmoothTangent::PrepareRowWeights(const mjModel* m) {
  // w_i's velocity before each dof and of each body (as cvel_free's at v_free, PrepareAnalyticRows)
  // for the marked contact rows whose w_i the solver gives, while weight_before has room
  const Problem& p = *stage_.problem;
  const double* cdof = stage_data_->cdof;
  const int nv = nv_;
  double* w = scratch_.a;
  double* cv = rows_.weight_cvel;
  int used = 0;
  for (int i = 0; i < p.nrow; i++) rows_.weighted[i] = 0;
  for (int c = 0; c < p.ncon; c++) {
    const Contact& con = p.con[c];
    for (int row = con.row; row < con.row + con.dim && used < rows_.weight_rows; row++) {
      if (!jac_rows_[row]) continue;
      mju_zero(w, nv);
      if (!stage_.solver->TangentRowWeight(p, row, w)) continue;
      BodyVelocities(m, cdof, w, cv, rows_.weight_before + 6 * static_cast<size_t>(nv) * used);
      for (int side = 0; side < 2; side++)
        Copy6(rows_.weight_body + 12 * row + 6 * side, cv + 6 * con.body[side]);
      rows_.weight_adr[row] = 6 * nv * used++;
      rows_.weighted[row] = 1;
    }
  }
  return used > 0;
}

void SmoothTangent::SolverRowTerms(const mjModel* m, const Contact& con, int row, int carry,
                                   int carry_end, const double (*tan)[2][6][6], bool vfree) {
  // dJ v_free of the contact's rows as the blocked path's dJ v (body velocities at v_free, from
  // uf before the carried dofs), dJ_i w_i of its weighted rows the same way at w_i, and dJ of
  // the other rows the solver reads, column by column
  const mjData* d = stage_data_;
  const SparseRows& J = stage_.problem->J;
  const double* uf = rne_.cvel_free_before_dof + 6 * carry;
  const char* weighted = row_weights();
  for (int side = 0; side < 2 && vfree; side++) {
    const int body = con.body[side];
    if (m->body_weldid[body] == 0) continue;  // (static: no velocity, no columns)
    const double sg = side ? 1 : -1;
    const bool carried = pairs_.body_moved[body];
    const double* Vf = rne_.cvel_free + 6 * body;
    for (int r = 0; r < con.dim; r++) {
      tan_.dJ_vfree[row + r] += sg * CarriedDot(tan[side], r, carried, uf, Vf);
      if (!weighted || !weighted[row + r]) continue;
      const double* uw = rows_.weight_before + rows_.weight_adr[row + r] + 6 * carry;
      const double* Vw = rows_.weight_body + 12 * (row + r) + 6 * side;
      tan_.dJ_w[row + r] += sg * CarriedDot(tan[side], r, carried, uw, Vw);
    }
  }
  const int adr0 = J.rowadr[row], n = J.rownnz[row];
  for (int r = 0; r < con.dim; r++) {
    if (!jac_rows_[row + r] || (weighted && weighted[row + r])) continue;
    double* dJ = tan_.dJ + J.rowadr[row + r];
    for (int q = 0; q < n; q++) {
      const int j = J.colind[adr0 + q], sign = rows_.nonzero_side[adr0 + q];
      dJ[q] = sign * Dot6(tan[sign > 0][j >= carry && j < carry_end][r], d->cdof + 6 * j);
    }
  }
}

bool SmoothTangent::PrepareRowProducts(const mjModel* m) {
  // x's velocity before each dof and of each body (as cvel_free's at v_free, PrepareAnalyticRows)
  const double *x = nullptr, *y = nullptr;
  rows_.product_x = rows_.product_y = nullptr;
  if (!stage_.solver->TangentProducts(*stage_.problem, &x, &y)) return false;
  if (x) BodyVelocities(m, stage_data_->cdof, x, rows_.product_cvel, rows_.product_before);
  rows_.product_x = x;
  rows_.product_y = y;
  return x || y;
}

void SmoothTangent::ProductTerms(const mjModel* m, const Contact& con, int row, int carry,
                                 const double (*tan)[2][6][6], double (*wrench)[2][6]) const {
  // dJ x of the contact's rows from x's velocities (SolverRowTerms' dJ v_free at x), and y's
  // wrenches as AnalyticContactRows sums f's
  const double* ux = rows_.product_before + 6 * carry;
  const double *x = rows_.product_x, *y = rows_.product_y;
  for (int side = 0; side < 2; side++) {
    const int body = con.body[side];
    if (m->body_weldid[body] == 0) continue;  // (static: no velocity, no columns)
    const double sg = side ? 1 : -1;
    const bool carried = pairs_.body_moved[body];
    const double* Vx = rows_.product_cvel + 6 * body;
    for (int r = 0; r < con.dim; r++) {
      if (x) tan_.dJ_x[row + r] += sg * CarriedDot(tan[side], r, carried, ux, Vx);
      const double yr = y ? y[row + r] : 0;
      if (yr == 0) continue;
      for (int i = 0; i < 6; i++) wrench[side][0][i] += yr * tan[side][0][r][i];
      for (int i = 0; i < 6 && carried; i++) wrench[side][1][i] += yr * tan[side][1][r][i];
    }
  }
}

void SmoothTangent::WrenchColumns(int row, int carry, int carry_end, const double (*wrench)[2][6],
                                  double* dJf) const {
  const SparseRows& J = stage_.problem->J;
  const double* cdof = stage_data_->cdof;
  const int adr = J.rowadr[row], n = J.rownnz[row];
  for (int q = 0; q < n; q++) {
    const int j = J.colind[adr + q];
    const int sign = rows_.nonzero_side[adr + q];
    dJf[j] += sign * Dot6(wrench[sign > 0][j >= carry && j < carry_end], cdof + 6 * j);
  }
}

void SmoothTangent::JointActuatorDifference(const mjModel* m, int k, mjtNum* field) {
  mjData* d = stage_data_;
  const int nv = nv_, na = na_;
  const double e = 1e-6;
  for (int q = 0; q < rne_.dof_actuator_num[k]; q++) {
    const int i = rne_.dof_actuators[rne_.dof_actuator_adr[k] + q];
    field[i] += e * m->actuator_gear[6 * i];
  }
  mj_fwdActuation(m, d);
  for (int q = 0; q < rne_.dof_actuator_num[k]; q++) {
    const int i = rne_.dof_actuators[rne_.dof_actuator_adr[k] + q];
    field[i] -= e * m->actuator_gear[6 * i];
  }
  for (int i = 0; i < nv; i++)
    tan_.dqfrc_smooth[i] += (d->qfrc_actuator[i] - nominal_.qfrc_actuator[i]) / e;
  for (int i = 0; i < na; i++) tan_.dact_dot[i] = (d->act_dot[i] - nominal_.act_dot[i]) / e;
  RestoreActuation();
}

}  // namespace contactkit
