// Copyright 2026 The contactkit developers.
//
// The smooth-dynamics tangent's stage preparation and its difference passes (smooth_tangent.h).
#include "plugin/deriv/smooth_tangent.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "plugin/deriv/spatial.h"
#include "plugin/step/compat.h"
#include "plugin/step/handle.h"
#include "solvers/common/impedance.h"

namespace contactkit {
namespace {

constexpr double kNudge = 1e-6;          // forward-difference step of actuation and sensors
constexpr double kPosStep = 1e-7;        // forward-difference step of the position passes (their
                                         // truncation error, not rounding, limits the accuracy)
constexpr double kJumpRate = 1e4;        // fastest a contact point moves per unit of a direction
                                         // (m); faster is a jump to other points (a new patch)
constexpr double kClosedMinSine = 1e-3;  // sine of a capsule's axis to the plane's normal
                                         // below which its contacts are re-collided

bool InRange(double x1, double x2, const double* range) {
  return x1 >= range[0] && x1 <= range[1] && x2 >= range[0] && x2 <= range[1];
}

// a 3-vector to unit length as mju_normalize3 (the same operations: inline, it was a tenth of a
// re-collision's matching); (1, 0, 0) below mjMINVAL
inline void Normalize3(double v[3]) {
  const double norm = std::sqrt(v[0] * v[0] + v[1] * v[1] + v[2] * v[2]);
  if (norm < mjMINVAL) {
    v[0] = 1;
    v[1] = v[2] = 0;
    return;
  }
  const double inv = 1 / norm;
  v[0] *= inv;
  v[1] *= inv;
  v[2] *= inv;
}

// MuJoCo's mju_makeFrame (not exported by 2.2.2): complete a contact frame from its normal (the
// operations of mju_normalize3, mju_norm3, mju_dot3 and mju_cross inline)
void MakeFrame(double frame[9]) {
  double* n = frame;
  double* t = frame + 3;
  Normalize3(n);
  if (std::sqrt(t[0] * t[0] + t[1] * t[1] + t[2] * t[2]) < 0.5) {
    t[0] = t[1] = t[2] = 0;
    if (n[1] < 0.5 && n[1] > -0.5) {
      t[1] = 1;
    } else {
      t[2] = 1;
    }
  }
  const double dot = n[0] * t[0] + n[1] * t[1] + n[2] * t[2];
  const double tmp[3] = {n[0] * dot, n[1] * dot, n[2] * dot};
  t[0] -= tmp[0];
  t[1] -= tmp[1];
  t[2] -= tmp[2];
  Normalize3(t);
  frame[6] = n[1] * t[2] - n[2] * t[1];
  frame[7] = n[2] * t[0] - n[0] * t[2];
  frame[8] = n[0] * t[1] - n[1] * t[0];
}

// mju_dist3's operations inline
inline double Dist3(const double a[3], const double b[3]) {
  const double d[3] = {a[0] - b[0], a[1] - b[1], a[2] - b[2]};
  return std::sqrt(d[0] * d[0] + d[1] * d[1] + d[2] * d[2]);
}

// ellipsoid g's support point along -n (MuJoCo's plane-convex contact: x + R (a o v / |v|),
// v = a o R'(-n)) is contact con's, c - (dist / 2) n, to 1e-9 of its largest radius
bool SupportMatches(const mjModel* m, const mjData* d, int g, const mjContact& con) {
  const double* R = d->geom_xmat + 9 * g;
  const double* a = m->geom_size + 3 * g;
  const double* n = con.frame;
  const double mn[3] = {-n[0], -n[1], -n[2]};
  double v[3];
  spatial::ScaledLocal(R, a, mn, v);
  const double len = std::sqrt(v[0] * v[0] + v[1] * v[1] + v[2] * v[2]);
  if (len < mjMINVAL) return false;
  const double tol = 1e-9 * std::max(a[0], std::max(a[1], a[2]));
  bool same = true;
  for (int k = 0; k < 3; k++) {
    double s = d->geom_xpos[3 * g + k];
    for (int j = 0; j < 3; j++) s += R[3 * k + j] * a[j] * v[j] / len;
    same &= std::abs(s - (con.pos[k] + 0.5 * con.dist * n[k])) <= tol;
  }
  return same;
}

}  // namespace

SmoothTangent::~SmoothTangent() {
  if (cfd_model_) mj_deleteModel(cfd_model_);
}

void SmoothTangent::Carve(ArenaCarver& c, const DerivSizes& n) {
  rows_.Carve(c, n);
  pairs_.Carve(c, n);
  rne_.Carve(c, n);
  radj_.Carve(c, n);
}

void SmoothTangent::Setup(const mjModel* m, const DerivSizes& n, mjData* stage_data,
                          mjData* pass_data, ckHandle* shadow) {
  nq_ = n.nq;
  nv_ = n.nv;
  na_ = n.na;
  nu_ = n.nu;
  nM_ = n.nM;
  ns_ = n.ns;
  stage_data_ = stage_data;
  pass_data_ = pass_data;
  shadow_ = shadow;
  pairs_.Fill(m, n);
  rne_.Fill(m);
  unit_kind_ = -1;  // (the tangent's arrays: this model's sizes, nothing known of them)
  dM_listed_ = false;
  rows_dirty_ = -2;

  // the sensor tangent re-collides only for sensors that read contacts or constraint forces:
  // of the acceleration stage's, these read only qacc, velocities and actuator forces
  acc_sensors_ = acc_rows_ = false;
  for (int i = 0; i < m->nsensor; i++) {
    if (m->sensor_needstage[i] != mjSTAGE_ACC) continue;
    acc_sensors_ = true;
    const int type = m->sensor_type[i];
    acc_rows_ |= type != mjSENS_ACCELEROMETER && type != mjSENS_FRAMELINACC &&
                 type != mjSENS_FRAMEANGACC && type != mjSENS_ACTUATORFRC;
  }
}

void SmoothTangent::BeginStage() {
  cfd_ = cfd_model_ != nullptr;
  mode_changes_ = 0;
  defer_free_velocity_ = false;  // (Derivative::Directions sets it for its loop)
  jac_rows_ = nullptr;           // (and this)
  row_weights_ = false;
  tan_.dv_free_unit = -2;
}

void SmoothTangent::PrepareRows(const mjModel* m) {
  const Problem& p = *stage_.problem;
  plain_varying_ = false;
  for (int i = 0; i < p.ne + p.nf + p.nl; i++) plain_varying_ |= PlainRowVaries(m, i);
  PrepareRowSlopes();
  rows_dirty_ = -2;  // (the tangent arrays hold another problem's rows)
}

void SmoothTangent::PreparePairs(const mjModel* m) {
  const mjData* d = stage_data_;
  pairs_.npair = 0;
  for (int c = 0; c < d->ncon; c++) {
    const mjContact* con = d->contact + c;
    const int g1 = ContactGeom(con, 0), g2 = ContactGeom(con, 1);
    if (pairs_.npair > 0 && pairs_.pair[pairs_.npair - 1].g1 == g1 &&
        pairs_.pair[pairs_.npair - 1].g2 == g2) {
      pairs_.pair[pairs_.npair - 1].count++;
      pairs_.contact_pair[c] = pairs_.npair - 1;
      continue;
    }
    ContactPair& pr = pairs_.pair[pairs_.npair];
    pr.g1 = g1;
    pr.g2 = g2;
    pr.first = c;
    pr.count = 1;
    pr.body1 = m->geom_bodyid[g1];
    pr.body2 = m->geom_bodyid[g2];

    // distance up to which mj_collideGeoms asks the collider for contacts
    pr.margin = GeomPairMargins(m, g1, g2).detect;
    pairs_.contact_pair[c] = pairs_.npair++;
  }
  for (int c = 0; c < d->ncon; c++) pairs_.nominal[c] = d->contact[c];
  // the re-collisions write only the geometry (dist, pos, frame) of a contact found again: the
  // rest is the nominal contact's
  for (int c = 0; c < d->ncon; c++) pairs_.forward[c] = pairs_.backward[c] = pairs_.nominal[c];
  // a plane against a sphere, capsule or box in closed form (ClosedTangent), but a capsule
  // within kClosedMinSine of standing on the plane (its contacts' tangent, the axis off the
  // normal)
  for (int q = 0; q < pairs_.npair; q++) {
    ContactPair& pr = pairs_.pair[q];
    const int type2 = pr.g1 >= 0 && pr.g2 >= 0 ? m->geom_type[pr.g2] : -1;
    pr.closed = type2 >= 0 && m->geom_type[pr.g1] == mjGEOM_PLANE &&
                (type2 == mjGEOM_SPHERE || type2 == mjGEOM_CAPSULE || type2 == mjGEOM_BOX ||
                 type2 == mjGEOM_ELLIPSOID);
    if (pr.closed && type2 == mjGEOM_CAPSULE) {
      const double* R = d->geom_xmat + 9 * pr.g2;
      const double* n = pairs_.nominal[pr.first].frame;
      const double s[3] = {R[5] * n[2] - R[8] * n[1], R[8] * n[0] - R[2] * n[2],
                           R[2] * n[1] - R[5] * n[0]};  // axis x normal
      pr.closed = std::sqrt(s[0] * s[0] + s[1] * s[1] + s[2] * s[2]) >= kClosedMinSine;
    }
    if (pr.closed && type2 == mjGEOM_ELLIPSOID) {
      pr.closed = pr.count == 1 && SupportMatches(m, d, pr.g2, pairs_.nominal[pr.first]);
    }
    if (type2 == mjGEOM_CYLINDER && m->geom_type[pr.g1] == mjGEOM_PLANE) {
      pr.closed = PreparePlaneCylinder(m, pr);
    }
    pr.bodies = PrepareBodyPair(m, pr);
    pr.owner = RelativeOwner(m, pr);
    pr.owner_mask = 0;
    pr.lu_ready = pr.reversed = false;
    pr.relative_pass = -1;
    pr.relative_check = 0;
  }
  IndexBodyPairs(m->nbody);
}

bool SmoothTangent::PreparePlaneCylinder(const mjModel* m, ContactPair& pr) const {
  const mjData* d = stage_data_;
  const mjContact* nominal = pairs_.nominal;
  if (pr.count > 4) return false;
  const double* n = nominal[pr.first].frame;
  CylinderRim rim;
  PlaneCylinderRim(m, d, pr.g2, n, &rim);
  if (rim.plen < kClosedMinSine || rim.elen < mjMINVAL) return false;
  const double tol = 1e-9 * std::max(m->geom_size[3 * pr.g2], m->geom_size[3 * pr.g2 + 1]);
  int used = 0;
  for (int i = 0; i < pr.count; i++) {
    const mjContact& con = nominal[pr.first + i];
    int kind = -1;
    for (int c = 0; c < 4 && kind < 0; c++) {
      double x[3];
      CylinderPoint(rim, d->geom_xpos + 3 * pr.g2, c, x);
      bool same = !(used & (1 << c));
      for (int k = 0; k < 3; k++) {
        same &=
            std::abs(x[k] - (con.pos[k] + 0.5 * con.dist * n[k])) <= tol && con.frame[k] == n[k];
      }
      if (same) kind = c;
    }
    if (kind < 0) return false;
    used |= 1 << kind;
    pr.cylinder_point[i] = static_cast<signed char>(kind);
  }
  return true;
}

int SmoothTangent::RelativeOwner(const mjModel* m, const ContactPair& pr) const {
  // convex primitives whose re-collided frames come from the normal alone (MakeFrame: a
  // collider's tangent only for parallel capsules, which are not taken), on bodies of different
  // trees (or one static); the owner a free root (its dofs first if both are), else the side
  // moved by more dofs; taken where the directions moving either side outnumber the owner's six
  // twists and the checks (OwnerTwists)
  if (!relative_pairs_ || pr.closed || pr.bodies || pr.g1 < 0 || pr.g2 < 0) return -1;
  int round = 0;
  const int geom[2] = {pr.g1, pr.g2}, body[2] = {pr.body1, pr.body2};
  for (int g = 0; g < 2; g++) {
    const int type = m->geom_type[geom[g]];
    if (type != mjGEOM_SPHERE && type != mjGEOM_CAPSULE && type != mjGEOM_ELLIPSOID &&
        type != mjGEOM_CYLINDER && type != mjGEOM_BOX) {
      return -1;
    }
    round += type == mjGEOM_SPHERE || type == mjGEOM_CAPSULE;
  }
  const int dofs[2] = {ChainDofs(m, body[0]), ChainDofs(m, body[1])};
  const int root[2] = {m->body_rootid[body[0]], m->body_rootid[body[1]]};
  if (round == 2 || (root[0] == root[1] && dofs[0] > 0 && dofs[1] > 0)) return -1;
  const bool free[2] = {FreeRoot(m, body[0]), FreeRoot(m, body[1])};
  int owner = dofs[1] > dofs[0] ? 1 : 0;
  if (free[0] && free[1]) {
    owner = m->body_dofadr[body[0]] < m->body_dofadr[body[1]] ? 0 : 1;
  } else if (free[0] || free[1]) {
    owner = free[0] ? 0 : 1;
  }
  const int cost = 6 + !free[owner] + (dofs[1 - owner] > 0);
  return dofs[0] + dofs[1] > cost ? owner : -1;
}

void SmoothTangent::IndexBodyPairs(int nbody) {
  // counts at adr[b + 1], their prefix sums, each body's pairs at adr[b]++ (then its end: the
  // next body's start, shifted back)
  int* adr = pairs_.body_pairadr;
  for (int b = 0; b <= nbody; b++) adr[b] = 0;
  for (int q = 0; q < pairs_.npair; q++) {
    const ContactPair& pr = pairs_.pair[q];
    adr[pr.body1 + 1]++;
    if (pr.body2 != pr.body1) adr[pr.body2 + 1]++;
  }
  for (int b = 0; b < nbody; b++) adr[b + 1] += adr[b];
  for (int q = 0; q < pairs_.npair; q++) {
    const ContactPair& pr = pairs_.pair[q];
    pairs_.body_pair[adr[pr.body1]++] = q;
    if (pr.body2 != pr.body1) pairs_.body_pair[adr[pr.body2]++] = q;
  }
  for (int b = nbody; b > 0; b--) adr[b] = adr[b - 1];
  adr[0] = 0;
}

bool SmoothTangent::PrepareBodyPair(const mjModel* m, ContactPair& pr) const {
  // MuJoCo's sphere-sphere contact of centres c1, c2, radii r1, r2: normal n = (c2 - c1) / L,
  // dist L - r1 - r2, point c1 + (r1 + dist / 2) n, the frame from n alone (MakeFrame). A
  // capsule's centre is the point x + s A of its segment (A the scaled axis, s in [-1, 1]) nearest
  // the sphere's centre, or for two capsules mjc_CapsuleCapsule's nearest points of the segments
  // (clipped s1, then s2; one contact: not parallel). 2.2.2 and 3.x differ only in operations
  if (pr.g1 < 0 || pr.g2 < 0 || pr.count != 1) return false;
  const int type[2] = {m->geom_type[pr.g1], m->geom_type[pr.g2]};
  for (int g = 0; g < 2; g++) {
    if (type[g] != mjGEOM_SPHERE && type[g] != mjGEOM_CAPSULE) return false;
  }
  const mjData* d = stage_data_;
  const int geom[2] = {pr.g1, pr.g2};
  double A[2][3];
  for (int g = 0; g < 2; g++) {
    const double* R = d->geom_xmat + 9 * geom[g];
    const double len = type[g] == mjGEOM_CAPSULE ? m->geom_size[3 * geom[g] + 1] : 0;
    for (int k = 0; k < 3; k++) A[g][k] = len * R[3 * k + 2];
  }
  const double* x1 = d->geom_xpos + 3 * pr.g1;
  const double* x2 = d->geom_xpos + 3 * pr.g2;
  const double dif[3] = {x1[0] - x2[0], x1[1] - x2[1], x1[2] - x2[2]};
  auto clip = [](double s, bool* free) {
    *free = s > -1 && s < 1;
    return s > 1 ? 1 : s < -1 ? -1 : s;
  };
  pr.s1 = pr.s2 = 0;
  pr.free1 = pr.free2 = false;
  if (type[0] == mjGEOM_SPHERE && type[1] == mjGEOM_CAPSULE) {
    const double mc = mju_dot3(A[1], A[1]);
    if (mc <= 0) return false;
    pr.s2 = clip(mju_dot3(A[1], dif) / mc, &pr.free2);
  } else if (type[0] == mjGEOM_CAPSULE) {
    const double ma = mju_dot3(A[0], A[0]), mb = -mju_dot3(A[0], A[1]), mc = mju_dot3(A[1], A[1]);
    const double u = -mju_dot3(A[0], dif), v = mju_dot3(A[1], dif), det = ma * mc - mb * mb;
    if (det < kClosedMinSine * kClosedMinSine * ma * mc) return false;  // (near) parallel
    pr.s1 = (mc * u - mb * v) / det;
    pr.s2 = (ma * v - mb * u) / det;
    pr.free1 = pr.free2 = true;
    if (pr.s1 > 1 || pr.s1 < -1) {
      pr.s1 = clip(pr.s1, &pr.free1);
      pr.s2 = (v + pr.s1 * -mb) / mc;
    }
    if (pr.s2 > 1 || pr.s2 < -1) {
      pr.s2 = clip(pr.s2, &pr.free2);
      pr.s1 = clip((u + pr.s2 * -mb) / ma, &pr.free1);
    }
  }

  // the nominal contact reproduced (else re-collided), the centres apart
  double c1[3], e[3];
  for (int k = 0; k < 3; k++) {
    c1[k] = x1[k] + pr.s1 * A[0][k];
    e[k] = x2[k] + pr.s2 * A[1][k] - c1[k];
  }
  const double r1 = m->geom_size[3 * pr.g1], r2 = m->geom_size[3 * pr.g2];
  const double L = mju_norm3(e), tol = 1e-9 * (L + r1 + r2);
  if (L < kClosedMinSine * (r1 + r2)) return false;
  const mjContact& g0 = pairs_.nominal[pr.first];
  double frame[9] = {e[0] / L, e[1] / L, e[2] / L, 0, 0, 0, 0, 0, 0};
  MakeFrame(frame);
  bool same = std::abs(L - r1 - r2 - g0.dist) <= tol;
  for (int k = 0; k < 3; k++) {
    same &= std::abs(c1[k] + (r1 + 0.5 * g0.dist) * frame[k] - g0.pos[k]) <= tol;
  }
  for (int k = 0; k < 9; k++) same &= std::abs(frame[k] - g0.frame[k]) <= 1e-9;
  return same;
}

void SmoothTangent::DenseQDeriv(const mjModel* m, const mjData* src, double* out, double sign,
                                bool clear) const {
  const int nv = nv_;
  const int* rownnz = DRowNnz(m, src);
  const int* rowadr = DRowAdr(m, src);
  const int* colind = DColInd(m, src);
  const std::vector<int>& dof_tree = extractor_.dof_tree();
  if (clear) {
    for (int i = 0; i < trees_.blockadr[extractor_.ntree()]; i++) out[i] = 0;
  }
  for (int i = 0; i < nv; i++) {
    const int t = dof_tree[i], n = trees_.dofnum[t], b = trees_.dofadr[t];
    for (int k = 0; k < rownnz[i]; k++) {
      const int j = colind[rowadr[i] + k];
      out[trees_.blockadr[t] + (j - b) * n + (i - b)] += sign * src->qDeriv[rowadr[i] + k];
    }
  }
}

void SmoothTangent::ClearTangent() {
  const int nv = nv_;
  mju_zero(tan_.dq, nv);
  mju_zero(tan_.dv, nv);
  mju_zero(tan_.dact, na_);
  mju_zero(tan_.du, nu_);
  mju_zero(tan_.dqderiv_qacc, nv);
  tan_.has_dM = tan_.has_dJ = tan_.has_dpos = tan_.has_dvel = tan_.has_dJ_force = false;
  tan_.has_dM_problem = tan_.has_drows = false;
  tan_.dM_one_tree = false;
  tan_.dv_free_unit = -2;
  tan_.dM_dof = -1;
  tan_.dM_lazy = false;
  tan_.has_dJ_vfree = false;
  unit_kind_ = -1;     // (a parameter direction follows: it may write any of them)
  dM_listed_ = false;  // (and dM)
  rows_dirty_ = -2;    // (and every row)
}

void SmoothTangent::ClearUnit() {
  // the last unit direction's entry (UnitTangent wrote no other), dqderiv_qacc if it may have
  if (unit_kind_ < 0) {
    ClearTangent();
    return;
  }
  double* unit[4] = {tan_.du, tan_.dact, tan_.dv, tan_.dq};  // (kCtrl .. kPos)
  unit[unit_kind_][unit_index_] = 0;
  if (unit_dqderiv_) mju_zero(tan_.dqderiv_qacc, nv_);
  tan_.has_dM = tan_.has_dJ = tan_.has_dpos = tan_.has_dvel = tan_.has_dJ_force = false;
  tan_.has_dM_problem = tan_.has_drows = false;
  tan_.dM_one_tree = false;
  tan_.dv_free_unit = -2;
  tan_.dM_dof = -1;
  tan_.dM_lazy = false;
  tan_.has_dJ_vfree = false;
}

void SmoothTangent::UnitTangent(const mjModel* m, int kind, int index) {
  ClearUnit();
  unit_kind_ = kind;
  unit_index_ = index;
  // (written by the implicit integrator's terms and Euler's damped RNE pass)
  unit_dqderiv_ = integrator_.implicit || integrator_.damped;
  // a position or velocity direction moves its tree's island's rows only (tree_island): their
  // tangents are formed there and the others kept zero (the analytic position tangents and the
  // velocity columns of J; the position passes write every row). The blocked path reads that
  // island only (QueueColumn)
  row_island_ = -2;
  if (stage_.has_rows && (kind == kPos || kind == kVel)) {
    const Problem& p = *stage_.problem;
    const int island = p.islands.tree_island[p.dof_tree[index]];
    if ((kind == kVel || analytic_) && (island_rows_ || stage_.batch)) {
      // (a tree without rows: none; the blocked path's, as before, the rows without dofs)
      row_island_ = island >= 0 ? island : stage_.batch ? -1 : -3;
      ZeroRowsBut(row_island_);
    } else {
      row_island_ = stage_.batch ? island : -2;
      rows_dirty_ = -2;
    }
  }

  switch (kind) {
    case kCtrl:
    case kAct:
      ActuationTangent(m, kind, index);
      break;
    case kVel:
      tan_.dv[index] = 1;
      VelocityTangent(m, index);
      break;
    default:
      tan_.dq[index] = 1;
      if (analytic_) {
        AnalyticPosition(m, index);
      } else {
        PositionPass(m, tan_.dq, nullptr, kPosStep);
      }
  }
  FreeVelocityTangent(m);
}

void SmoothTangent::ZeroRowsBut(int island) {
  // zero the rows of rows_dirty_ (-1: the rows without dofs, -2: any: every row) but island's
  const Problem& p = *stage_.problem;
  const Islands& is = p.islands;
  const SparseRows& J = p.J;
  auto zero = [&](int i) {
    tan_.dpos[i] = tan_.dvel[i] = tan_.dJ_qvel_next[i] = tan_.dJ_vfree[i] = tan_.dJ_w[i] = 0;
    tan_.dJ_x[i] = 0;
    tan_.dimp[i] = tan_.dR[i] = tan_.daref[i] = 0;
    mju_zero(tan_.dJ + J.rowadr[i], J.rownnz[i]);
    const int c = rows_.row_contact[i];
    if (c >= 0) {
      mju_zero(tan_.dframe + 6 * c, 6);
      rows_.contact_dJ_written[c] = 0;
    }
  };
  if (rows_dirty_ >= 0 && rows_dirty_ != island) {
    const int* rows = is.rows + is.rowadr[rows_dirty_];
    for (int a = 0; a < is.nrows[rows_dirty_]; a++) zero(rows[a]);
  } else if (rows_dirty_ == -2 || (rows_dirty_ == -1 && island != -1)) {
    for (int i = 0; i < p.nrow; i++) {
      if (island < 0 || is.row_island[i] != island) zero(i);
    }
  }
  rows_dirty_ = island;
}

void SmoothTangent::FreeVelocityTangent(const mjModel* m) {
  // dv_free = dv + h M_p^-1 (dqfrc_smooth - dM_p (v_free - v) / h), M_p the problem's matrix
  // (the blocked "mujoco" path builds its right-hand side without it)
  const int nv = nv_;
  tan_.dv_free_unit = -2;
  if (stage_.has_rows && !stage_.batch) {
    const Problem& p = *stage_.problem;
    const double* dM = tan_.has_dM_problem ? tan_.dM_problem : tan_.dM;
    double* x = tan_.dv_free;
    // (deferred: x alone, zero off its trees; the solver's block solve gives zero there too)
    const bool defer = defer_free_velocity_ && unit_kind_ >= 0 && defer_free_velocity_on_;
    // the trees of the span of dqfrc_smooth and dM's rows; elsewhere the solve gives zero and
    // dv_free = dv (a humanoid100 direction reaches one tree of a hundred)
    int lo, hi;
    NonzeroSpan(&tan_.dqfrc_smooth, 1, nv, &lo, &hi);
    if (tan_.has_dM && tan_.dM_end > tan_.dM_begin) {
      lo = hi > lo ? std::min(lo, tan_.dM_begin) : tan_.dM_begin;
      hi = std::max(hi, tan_.dM_end);
    }
    const int t0 = hi > lo ? p.dof_tree[lo] : 0, t1 = hi > lo ? p.dof_tree[hi - 1] + 1 : 0;
    lo = hi > lo ? p.islands.tree_dofadr[t0] : 0;
    hi = t1 > t0 ? p.islands.tree_dofadr[t1 - 1] + p.islands.tree_dofnum[t1 - 1] : 0;
    if (defer) {
      mju_zero(x, lo);
      mju_zero(x + hi, nv - hi);
    } else {
      mju_copy(x, tan_.dv, lo);
      mju_copy(x + hi, tan_.dv + hi, nv - hi);
    }
    mju_copy(x + lo, tan_.dqfrc_smooth + lo, hi - lo);
    if (tan_.dM_lazy) {
      MassVector(tan_.dM_dof, 1, -1, x);  // (dM x in closed form)
    } else if (tan_.has_dM) {
      const int b = tan_.dM_begin, e = tan_.dM_end;
      for (int i = b; i < e; i++) scratch_.a[i] = (p.v_free[i] - nominal_.qvel[i]) / p.h;
      for (int r = 0; r < tan_.dM_nrows; r++) {
        const int i = tan_.dM_rows[r];
        int adr = m->dof_Madr[i];
        x[i] -= dM[adr++] * scratch_.a[i];
        for (int j = m->dof_parentid[i]; j >= 0; j = m->dof_parentid[j], adr++) {
          x[i] -= dM[adr] * scratch_.a[j];
          x[j] -= dM[adr] * scratch_.a[i];
        }
      }
    }
    if (defer) {
      tan_.dv_free_unit = unit_kind_ == kVel ? unit_index_ : -1;
      return;
    }
    // tree by tree, skipping the trees the direction does not reach (their solve gives zero)
    SolveNonzeroTrees(p.mass, p.islands, t0, t1, x);
    for (int i = lo; i < hi; i++) x[i] = tan_.dv[i] + p.h * x[i];
  }
}

void SmoothTangent::ActuationTangent(const mjModel* m, int kind, int index) {
  mjData* d = stage_data_;
  const int nv = nv_, na = na_;
  double e = kNudge;
  double* target;
  if (kind == kCtrl) {
    tan_.du[index] = 1;
    target = d->ctrl + index;
    if (m->actuator_ctrllimited[index]) {
      // as mjd_transitionFD: forward if the nudge stays in range, else backward, else zero
      const double* range = m->actuator_ctrlrange + 2 * index;
      const double u = *target;
      e = InRange(u, u + kNudge, range) ? kNudge : InRange(u - kNudge, u, range) ? -kNudge : 0;
    }
  } else {
    tan_.dact[index] = 1;
    target = d->act + index;
  }
  if (e == 0) {
    mju_zero(tan_.dqfrc_smooth, nv);
    mju_zero(tan_.dact_dot, na);
    return;
  }
  if (kind == kCtrl && LinearInCtrl(m, index, e)) {
    // force = gain ctrl + bias(length, velocity) on both sides of the nudge: moment' gain
    const double gain = m->actuator_gainprm[mjNGAIN * index];
    ActuatorMoment(m, d, index, tan_.dqfrc_smooth);
    for (int i = 0; i < nv; i++) tan_.dqfrc_smooth[i] *= gain;
    mju_zero(tan_.dact_dot, na);
  } else {
    const double saved = *target;
    *target = saved + e;
    mj_fwdActuation(m, d);
    *target = saved;
    for (int i = 0; i < nv; i++)
      tan_.dqfrc_smooth[i] = (d->qfrc_actuator[i] - nominal_.qfrc_actuator[i]) / e;
    for (int i = 0; i < na; i++) tan_.dact_dot[i] = (d->act_dot[i] - nominal_.act_dot[i]) / e;
  }

  // implicit: qDeriv holds gain_vel * (ctrl or act) moment' moment of affine-gain actuators
  if (integrator_.implicit) {
    const int iu = kind == kCtrl ? index : index + m->nu - na;
    const bool direct = m->actuator_dyntype[iu] == mjDYN_NONE;
    const bool skipped =
        kQDerivSkipsClamped && ActuatorForceClamped(m, iu, nominal_.actuator_force[iu]);
    if (m->actuator_gaintype[iu] == mjGAIN_AFFINE && direct == (kind == kCtrl) && !skipped) {
      const double gain_vel = m->actuator_gainprm[mjNGAIN * iu + 2];
      double* moment = rows_.moment;
      ActuatorMoment(m, d, iu, moment);
      const double ma = mju_dot(moment, integrator_.qacc, nv);
      for (int i = 0; i < nv; i++)
        tan_.dqderiv_qacc[i] = m->opt.timestep * gain_vel * moment[i] * ma;
    }
  }
}

bool SmoothTangent::LinearInCtrl(const mjModel* m, int i, double e) const {
  // mj_fwdActuation's force of actuator i is gain ctrl + bias with a fixed gain, no activation and
  // no force clamp between ctrl and ctrl + e (the nudge keeps ctrl in its range)
  if (mjDISABLED(mjDSBL_ACTUATION) || m->actuator_dyntype[i] != mjDYN_NONE ||
      m->actuator_gaintype[i] != mjGAIN_FIXED || (m->actuator_biastype[i] == mjBIAS_USER) ||
      !ActuatorForcePassesThrough(m, i)) {
    return false;
  }
  if (m->actuator_forcelimited[i]) {
    const double* range = m->actuator_forcerange + 2 * i;
    const double f = nominal_.actuator_force[i], f1 = f + m->actuator_gainprm[mjNGAIN * i] * e;
    if (!(f > range[0] && f < range[1] && f1 > range[0] && f1 < range[1])) return false;
  }
  return true;
}

void SmoothTangent::CorrectActuatorVel(const mjModel* m, const mjData* d) {
  if (mjDISABLED(mjDSBL_ACTUATION)) return;
  const std::vector<int>& dof_tree = extractor_.dof_tree();
  const int* rownnz = DRowNnz(m, d);
  const int* rowadr = DRowAdr(m, d);
  const int* colind = DColInd(m, d);
  for (int i = 0; i < nu_; i++) {
    // MuJoCo's term: bias kv + gain kv times the raw control, also when clamped before 3.5, and
    // only in M's pattern (not between sibling dofs of a tendon); the force's: zero when clamped,
    // the clamped control otherwise, between every pair of dofs of a tree
    const double* gp = m->actuator_gainprm + mjNGAIN * i;
    const double* bp = m->actuator_biasprm + mjNBIAS * i;
    const double bias_vel = m->actuator_biastype[i] == mjBIAS_AFFINE ? bp[2] : 0;
    const double gain_vel = m->actuator_gaintype[i] == mjGAIN_AFFINE ? gp[2] : 0;
    if ((bias_vel == 0 && gain_vel == 0) || !ActuatorForcePassesThrough(m, i)) continue;
    double u, uc;
    if (m->actuator_dyntype[i] == mjDYN_NONE) {
      u = uc = d->ctrl[i];
      if (m->actuator_ctrllimited[i] && !mjDISABLED(mjDSBL_CLAMPCTRL)) {
        uc = mju_clip(u, m->actuator_ctrlrange[2 * i], m->actuator_ctrlrange[2 * i + 1]);
      }
    } else {
#if CK_MJ3
      // actearly: MuJoCo's term uses the next activation; left as MuJoCo has it
      if (m->actuator_actearly[i] && gain_vel != 0) continue;
      u = uc = d->act[m->actuator_actadr[i] + m->actuator_actnum[i] - 1];
#else
      u = uc = d->act[i - (m->nu - m->na)];
#endif
    }
    const bool clamped = ActuatorForceClamped(m, i, nominal_.actuator_force[i]);
    const double mujoco = clamped && kQDerivSkipsClamped ? 0 : bias_vel + gain_vel * u;
    const double wanted = clamped ? 0 : bias_vel + gain_vel * uc;
    double* moment = rows_.moment;
    ActuatorMoment(m, d, i, moment);
    for (int r = 0; r < nv_; r++) {
      if (moment[r] == 0) continue;
      const int t = dof_tree[r], n = trees_.dofnum[t], b = trees_.dofadr[t];
      double* col = trees_.qderiv + trees_.blockadr[t] - b;  // entry (r, c) at col[(c - b) n + r]
      for (int k = 0; k < rownnz[r]; k++) {
        const int c = colind[rowadr[r] + k];
        col[(c - b) * n + r] -= mujoco * moment[r] * moment[c];
      }
      for (int c = b; c < b + n; c++) col[(c - b) * n + r] += wanted * moment[r] * moment[c];
    }
  }
}

void SmoothTangent::RestoreActuation() {
  mju_copy(stage_data_->actuator_force, nominal_.actuator_force, nu_);
  mju_copy(stage_data_->qfrc_actuator, nominal_.qfrc_actuator, nv_);
  mju_copy(stage_data_->act_dot, nominal_.act_dot, na_);
}

void SmoothTangent::VelocityTangent(const mjModel* m, int index) {
  const int nv = nv_;

  // smooth forces: column of qDeriv (its tree's dense block), or analytic
  const int t = extractor_.dof_tree()[index], n = trees_.dofnum[t], b = trees_.dofadr[t];
  if (analytic_) {
    AnalyticVelocity(m, index);
  } else {
    mju_zero(tan_.dqfrc_smooth, nv);
    mju_zero(tan_.dact_dot, na_);
    const double* blk = trees_.qderiv + trees_.blockadr[t] + (index - b) * n;
    for (int i = 0; i < n; i++) tan_.dqfrc_smooth[b + i] = blk[i];
  }

  // implicit: d(qDeriv aint)/dv of the velocity-bilinear RNE part
  if (integrator_.implicit) {
    const double* blk2 = trees_.qderiv_rne + trees_.blockadr[t] + (index - b) * n;
    for (int i = 0; i < n; i++) tan_.dqderiv_qacc[b + i] = m->opt.timestep * blk2[i];
  }

  // rows: dvel = J e_index (unread by the blocked columns' product: not formed,
  // set_velocity_rows_unread; a solver that reads none is given none)
  if (stage_.has_rows) {
    tan_.has_dvel = stage_.batch || !velocity_rows_unread_;
    if (!velocity_rows_unread_) VelocityRows(index);
  }
}

void SmoothTangent::VelocityRows(int index) {
  // dvel = J e_index, the column of J (on the rows of its island, UnitTangent)
  ForRows(0, stage_.problem->nrow, [&](int i) {
    tan_.dvel[i] = 0;
    return 1;
  });
  for (int q = rows_.col_adr[index]; q < rows_.col_adr[index + 1]; q++)
    tan_.dvel[rows_.col_row[q]] = rows_.col_val[q];
  RowTangents();
}

void SmoothTangent::PositionPass(const mjModel* m, const double* dq, const double* dv, double eps) {
  mjData* d = pass_data_;
  const int nv = nv_;

  // perturbed state
  mju_copy(d->qpos, nominal_.qpos, nq_);
  mj_integratePos(m, d->qpos, dq, eps);
  for (int i = 0; i < nv; i++) d->qvel[i] = nominal_.qvel[i] + (dv ? eps * dv[i] : 0);

  // position stage without collision, constraints and factorization
  mj_kinematics(m, d);
  mj_comPos(m, d);
  if (stage_.sensors) mj_camlight(m, d);
  mj_tendon(m, d);
  MassMatrix(m, d);
  mj_transmission(m, d);
  CopyLegacyM(m, d, tan_.dM);
  for (int i = 0; i < nM_; i++) tan_.dM[i] = (tan_.dM[i] - nominal_.mass[i]) / eps;
  dM_listed_ = false;
  tan_.has_dM = true;
  tan_.dM_begin = 0;
  tan_.dM_end = nv;
  tan_.AllRows();

  // bodies the perturbation moves
  for (int b = 0; b < m->nbody; b++) {
    char moved = b > 0 && pairs_.body_moved[m->body_parentid[b]];
    for (int j = m->body_dofadr[b]; j < m->body_dofadr[b] + m->body_dofnum[b]; j++) {
      moved |= dq[j] != 0;
    }
    pairs_.body_moved[b] = moved;
  }
  pairs_.moved_first = -1;

  // constraint rows
  if (stage_.has_rows) {
    Recollide(m, d, eps);
    ContactTangent(m, d, dq, eps);
    PlainRowTangent(m, dq, eps);
    tan_.has_dJ = tan_.has_dpos = tan_.has_dvel = true;
  }

  // velocity and actuation stages, smooth force
  d->nefc = 0;
  mj_fwdVelocity(m, d);
  mj_fwdActuation(m, d);
  mj_fwdAcceleration(m, d);
  for (int i = 0; i < nv; i++)
    tan_.dqfrc_smooth[i] = (d->qfrc_smooth[i] - nominal_.qfrc_smooth[i]) / eps;
  for (int i = 0; i < na_; i++) tan_.dact_dot[i] = (d->act_dot[i] - nominal_.act_dot[i]) / eps;

  // implicit: d(qDeriv aint)/dq by the exact velocity differences of the perturbed RNE
  if (integrator_.implicit && !dv) {
    double* x = scratch_.a;
    SmoothVelocityProduct(m, d, x);
    for (int i = 0; i < nv; i++) {
      tan_.dqderiv_qacc[i] = m->opt.timestep * (x[i] - trees_.qderiv_qacc_poly[i]) / eps;
    }
  }

  if (stage_.has_rows) RowVelocityTangents(true, dv);
}

void SmoothTangent::SmoothVelocityProduct(const mjModel* m, mjData* d, double* out) {
  // qDeriv(q) aint for the polynomial velocity terms (RNE: quadratic, damping and affine
  // actuators: linear): (F(v + a) - F(v - a)) / 2, F = qfrc_passive + qfrc_actuator - qfrc_bias
  // (implicitfast: qfrc_bias on bias_dof only)
  const int nv = nv_;
  double* save = scratch_.b;
  mju_copy(save, d->qvel, nv);
  for (int side = 0; side < 2; side++) {
    const double s = side == 0 ? 1 : -1;
    for (int i = 0; i < nv; i++) d->qvel[i] = save[i] + s * integrator_.qacc[i];
    mj_fwdVelocity(m, d);
    mj_fwdActuation(m, d);
    for (int i = 0; i < nv; i++) {
      const double bias = integrator_.bias_dof[i] ? d->qfrc_bias[i] : 0;
      const double f = d->qfrc_passive[i] + d->qfrc_actuator[i] - bias;
      out[i] = side == 0 ? 0.5 * f : out[i] - 0.5 * f;
    }
  }
  mju_copy(d->qvel, save, nv);
}

bool SmoothTangent::Recollide(const mjModel* m, mjData* d, double eps) {
  bool same = true;
  for (int k = 0; k < pairs_.npair; k++) {
    const ContactPair& pr = pairs_.pair[k];
    if (!pairs_.body_moved[pr.body1] && !pairs_.body_moved[pr.body2]) {
      for (int c = pr.first; c < pr.first + pr.count; c++) pairs_.forward[c] = pairs_.nominal[c];
      continue;
    }
    for (int c = pr.first; c < pr.first + pr.count; c++) pairs_.found[c] = 0;
    bool found = RecollidePair(m, d, k, eps, 1, pairs_.forward);

    // backward: the geom poses reflected through the nominal ones (centered differences, as
    // AnalyticPosition; the path's own curvature costs eps times the tangent, not the patch's)
    double saved[2][12];
    for (int g = 0; g < 2; g++) {
      const int geom = g ? pr.g2 : pr.g1;
      double* pos = d->geom_xpos + 3 * geom;
      double* mat = d->geom_xmat + 9 * geom;
      mju_copy3(saved[g], pos);
      mju_copy(saved[g] + 3, mat, 9);
      for (int r = 0; r < 3; r++) pos[r] = 2 * stage_data_->geom_xpos[3 * geom + r] - saved[g][r];
      for (int r = 0; r < 9; r++)
        mat[r] = 2 * stage_data_->geom_xmat[9 * geom + r] - saved[g][3 + r];
    }
    found &= RecollidePair(m, d, k, eps, 2, pairs_.backward);
    for (int g = 0; g < 2; g++) {
      const int geom = g ? pr.g2 : pr.g1;
      mju_copy3(d->geom_xpos + 3 * geom, saved[g]);
      mju_copy(d->geom_xmat + 9 * geom, saved[g] + 3, 9);
    }
    if (!found) {
      same = false;
      mode_changes_++;
    }

    // contacts not found again (a patch that switched points, a changed count) are held and
    // move with their bodies from stage_data_ to d
    Twist tw[2];
    for (int side = 0; side < 2 && !found; side++) {
      const int b = side ? pr.body2 : pr.body1;
      const double* R0 = stage_data_->xmat + 9 * b;
      const double* R1 = d->xmat + 9 * b;
      double W[9];  // (R1 R0' - I) / eps
      for (int r = 0; r < 3; r++) {
        for (int c = 0; c < 3; c++) {
          W[3 * r + c] = (mju_dot3(R1 + 3 * r, R0 + 3 * c) - (r == c)) / eps;
        }
      }
      tw[side].w[0] = 0.5 * (W[7] - W[5]);
      tw[side].w[1] = 0.5 * (W[2] - W[6]);
      tw[side].w[2] = 0.5 * (W[3] - W[1]);
      for (int r = 0; r < 3; r++) {
        tw[side].o[r] = stage_data_->xpos[3 * b + r];
        tw[side].v[r] = (d->xpos[3 * b + r] - stage_data_->xpos[3 * b + r]) / eps;
      }
    }

    // the pass's geometry: nominal plus eps times the tangent
    for (int c = pr.first; c < pr.first + pr.count; c++) {
      double dp[3], dF[9], ddist;
      if (!GeometryTangent(c, eps, dp, dF, &ddist)) {
        PatchTangent(c, eps, tw[0], tw[1], dp, dF, &ddist);
      }
      mjContact& o = pairs_.forward[c];
      o = pairs_.nominal[c];
      for (int r = 0; r < 3; r++) o.pos[r] += eps * dp[r];
      for (int r = 0; r < 9; r++) o.frame[r] += eps * dF[r];
      o.dist += eps * ddist;
    }
  }
  return same;
}

bool SmoothTangent::RecollidePair(const mjModel* m, mjData* d, int k, double step, int bit,
                                  mjContact* out) {
  const ContactPair& pr = pairs_.pair[k];
  // the buffer's frames have no tangent (zero from Setup, and again after each use)
  mjContact* buf = pairs_.collide_out;
  const int nraw = CollideGeomPair(m, d, pr.g1, pr.g2, pr.margin, buf);
  recollisions_++;
  const bool same = MatchPair(m, k, nraw, kJumpRate * step, bit, out);
  for (int i = 0; i < nraw; i++) {
    for (int q = 3; q < 9; q++) buf[i].frame[q] = 0;
  }
  return same;
}

bool SmoothTangent::MatchPair(const mjModel* m, int k, int n, double jump, int bit,
                              mjContact* out) {
  const ContactPair& pr = pairs_.pair[k];
  mjContact* buf = pairs_.collide_out;
  const int t1 = m->geom_type[pr.g1], t2 = m->geom_type[pr.g2];

  // box-box repeats, as mj_collideGeoms removes them
  if (t1 == mjGEOM_BOX && t2 == mjGEOM_BOX) {
    int kept = 0;
    for (int i = 0; i < n; i++) {
      bool repeat = false;
      for (int j = i + 1; j < n && !repeat; j++) {
        repeat = buf[i].pos[0] == buf[j].pos[0] && buf[i].pos[1] == buf[j].pos[1] &&
                 buf[i].pos[2] == buf[j].pos[2];
      }
      if (!repeat) buf[kept++] = buf[i];
    }
    n = kept;
  }
  if (n != pr.count) {
    // the contact set changes within the nudge: keep the nominal geometry of this pair
    for (int c = pr.first; c < pr.first + pr.count; c++) out[c] = pairs_.nominal[c];
    return false;
  }

  // match each nominal contact with the nearest new one within jump (colliders may reorder
  // contacts of equal depth, e.g. a capsule's two ends, as the pose changes); one farther away
  // is another point of a patch (MuJoCo 3.x picks a flat cylinder cap's patch among the
  // vertices of a polygon, ties broken by rounding): it keeps its nominal geometry, unmarked
  bool taken[mjMAXCONPAIR] = {};
  bool all = true;
  for (int i = 0; i < n; i++) {
    const int c = pr.first + i;
    int best = -1;
    double best_dist = 0;
    for (int j = 0; j < n; j++) {
      if (taken[j]) continue;
      const double dd = Dist3(buf[j].pos, pairs_.nominal[c].pos);
      if (best < 0 || dd < best_dist) {
        best = j;
        best_dist = dd;
      }
    }
    // (out's other fields are the nominal contact's: PreparePairs, and every whole copy)
    mjContact& o = out[c];
    const mjContact& g = best_dist > jump ? pairs_.nominal[c] : buf[best];
    if (best_dist > jump) {
      all = false;
    } else {
      taken[best] = true;
      pairs_.found[c] |= bit;
      MakeFrame(buf[best].frame);
    }
    o.dist = g.dist;
    for (int r = 0; r < 3; r++) o.pos[r] = g.pos[r];
    for (int r = 0; r < 9; r++) o.frame[r] = g.frame[r];
  }
  return all;
}

void SmoothTangent::ContactTangent(const mjModel* m, mjData* d, const double* dq, double eps) {
  const Problem& p = *stage_.problem;
  const SparseRows& J = p.J;
  int* cols = rows_.contact_cols;
  double* rows = rows_.contact_rows;
  for (int c = 0; c < p.ncon; c++) {
    const Contact& con = p.con[c];
    const mjContact& g = pairs_.forward[con.mj_index];
    const int pair = pairs_.contact_pair[con.mj_index];
    const bool moved =
        pairs_.body_moved[pairs_.pair[pair].body1] || pairs_.body_moved[pairs_.pair[pair].body2];
    const int n0 = J.rownnz[con.row];
    if (!moved) {
      for (int r = 0; r < con.dim; r++) {
        const int adr = J.rowadr[con.row + r];
        for (int k = 0; k < n0; k++) tan_.dJ[adr + k] = 0;
      }
      tan_.dpos[con.row] = 0;
      for (int r = 1; r < con.dim; r++) tan_.dpos[con.row + r] = 0;
      for (int i = 0; i < 6; i++) tan_.dframe[6 * c + i] = 0;
      continue;
    }
    const int n = extractor_.ContactRows(m, d, con.body[0], con.body[1], g.pos, g.frame, con.dim,
                                         cols, rows, nv_);
    for (int r = 0; r < con.dim; r++) {
      const int adr = J.rowadr[con.row + r];
      for (int k = 0; k < n0; k++) {
        tan_.dJ[adr + k] = (n == n0 ? rows[r * nv_ + k] - J.val[adr + k] : 0) / eps;
      }
    }

    // gap from the collision itself (some colliders, box-box among them, do not report the
    // distance whose gradient is the normal row)
    tan_.dpos[con.row] = (g.dist - pairs_.nominal[con.mj_index].dist) / eps;
    for (int r = 1; r < con.dim; r++) tan_.dpos[con.row + r] = 0;
    for (int i = 0; i < 6; i++) {
      tan_.dframe[6 * c + i] = (g.frame[3 + i] - pairs_.nominal[con.mj_index].frame[3 + i]) / eps;
    }
  }
}

void SmoothTangent::PlainRowTangent(const mjModel* m, const double* dq, double eps) {
  const Problem& p = *stage_.problem;
  const SparseRows& J = p.J;
  const int nplain = p.ne + p.nf + p.nl;

  // rows whose Jacobian is constant: dof friction and hinge / slide limits
  for (int i = 0; i < nplain; i++) {
    const int adr = J.rowadr[i];
    for (int k = 0; k < J.rownnz[i]; k++) tan_.dJ[adr + k] = 0;
    tan_.dpos[i] = p.kind[i] == kRowFriction ? 0 : J.Dot(i, dq);
  }
  if (!plain_varying_) return;

  // the others from MuJoCo's own rows at the perturbed state (contacts left out)
  mjData* d = pass_data_;
  const int ncon = d->ncon;
  d->ncon = 0;
  mj_makeConstraint(m, d);
  d->ncon = ncon;
  const bool sparse = mj_isSparse(m);
  int j = 0;
  for (int i = 0; i < nplain; i++) {
    if (!PlainRowVaries(m, i)) {
      // advance past the matching MuJoCo row
      while (j < d->nefc && !(d->efc_type[j] == p.mj_type[i] && d->efc_id[j] == p.mj_id[i])) j++;
      if (j < d->nefc) j++;
      continue;
    }
    while (j < d->nefc && !(d->efc_type[j] == p.mj_type[i] && d->efc_id[j] == p.mj_id[i])) j++;
    if (j >= d->nefc) break;
    const int adr = J.rowadr[i];
    for (int k = 0; k < J.rownnz[i]; k++) {
      const int col = J.colind[adr + k];
      double val = 0;
      if (sparse) {
        const int radr = d->efc_J_rowadr[j];
        for (int q = 0; q < d->efc_J_rownnz[j]; q++) {
          if (d->efc_J_colind[radr + q] == col) val = d->efc_J[radr + q];
        }
      } else {
        val = d->efc_J[static_cast<size_t>(j) * nv_ + col];
      }
      tan_.dJ[adr + k] = (val - J.val[adr + k]) / eps;
    }
    tan_.dpos[i] = (d->efc_pos[j] - p.pos[i]) / eps;
    j++;
  }
  d->nefc = 0;
}

bool SmoothTangent::PlainRowVaries(const mjModel* m, int i) const {
  const Problem& p = *stage_.problem;
  if (p.kind[i] == kRowFriction) return p.mj_type[i] != mjCNSTR_FRICTION_DOF;
  if (p.kind[i] == kRowLimit) {
    return p.mj_type[i] != mjCNSTR_LIMIT_JOINT || m->jnt_type[p.mj_id[i]] == mjJNT_BALL;
  }
  return true;  // equality
}

void SmoothTangent::PrepareRowSlopes() {
  // per row: dR / dimp = -R / (imp (1 - imp)); J by columns
  const Problem& p = *stage_.problem;
  const SparseRows& J = p.J;
  for (int i = 0; i < p.nrow; i++) rows_.dR_dimp[i] = -p.R[i] / (p.imp[i] * (1 - p.imp[i]));
  for (int j = 0; j <= nv_; j++) rows_.col_adr[j] = 0;
  for (int q = 0; q < J.nnz; q++) rows_.col_adr[J.colind[q] + 1]++;
  for (int j = 0; j < nv_; j++) rows_.col_adr[j + 1] += rows_.col_adr[j];
  for (int i = 0; i < J.nrow; i++) {
    for (int q = J.rowadr[i]; q < J.rowadr[i] + J.rownnz[i]; q++) {
      const int at = rows_.col_adr[J.colind[q]]++;
      rows_.col_row[at] = i;
      rows_.col_val[at] = J.val[q];
    }
  }
  for (int j = nv_; j > 0; j--) rows_.col_adr[j] = rows_.col_adr[j - 1];
  rows_.col_adr[0] = 0;

  // per contact: d imp / d dist, the position term of aref and its slope (1, or the softplus');
  // its first row's contact
  for (int i = 0; i < p.nrow; i++) rows_.row_contact[i] = -1;
  for (int c = 0; c < p.ncon; c++) {
    const Contact& con = p.con[c];
    rows_.row_contact[con.row] = c;
    if (cfd_ && rows_.cfd_distance[c] >= 0) {
      CfdImpedance(con.solimp, rows_.cfd_distance[c], &rows_.imp_slope[c]);
      rows_.position[c] = CfdSoftplus(rows_.cfd_distance[c], &rows_.position_slope[c]);
    } else {
      Impedance(con.solimp, con.dist, con.margin, &rows_.imp_slope[c]);
      rows_.position[c] = con.dist - con.margin;
      rows_.position_slope[c] = 1;
    }
  }
}

void SmoothTangent::RowVelocityTangents(bool with_dJ, const double* dv) {
  const SparseRows& J = stage_.problem->J;
  for (int i = 0; i < J.nrow; i++) {
    if (SkipRow(i)) continue;
    double s = 0;
    const int adr = J.rowadr[i];
    for (int k = 0; k < J.rownnz[i]; k++) {
      const int c = J.colind[adr + k];
      if (with_dJ) s += tan_.dJ[adr + k] * nominal_.qvel[c];
      if (dv) s += J.val[adr + k] * dv[c];
    }
    tan_.dvel[i] = s;
  }
  RowTangents();
}

int SmoothTangent::ImpedanceArgument(const Problem& p, int i, double g[6], double* norm) const {
  // a connect's or weld's rows: the norm of their residual (torques scaled), else the row's
  // distance alone
  const int type = p.kind[i] == kRowEquality ? pairs_.eq_type[p.mj_id[i]] : -1;
  if (type != mjEQ_CONNECT && type != mjEQ_WELD) {
    g[0] = *norm = 1;
    return 1;
  }
  const int n = type == mjEQ_WELD ? 6 : 3;
  double rr = 0;
  for (int k = 0; k < n; k++) {
    const double s = k < 3 ? 1 : pairs_.eq_torquescale[p.mj_id[i]];
    g[k] = s * s * p.pos[i + k];
    rr += g[k] * p.pos[i + k];
  }
  *norm = std::sqrt(rr);
  return n;
}

void SmoothTangent::RowTangents(bool reference) {
  const Problem& p = *stage_.problem;
  const int nplain = p.ne + p.nf + p.nl;

  // velocities only (no position tangent): aref = -B vel
  if (!tan_.has_dpos) {
    ForRows(0, p.nrow, [&](int i) {
      tan_.dimp[i] = tan_.dR[i] = 0;
      tan_.daref[i] = tan_.has_dvel ? -p.KB[2 * i + 1] * tan_.dvel[i] : 0;
      return 1;
    });
    return;
  }
  const mjData* d = stage_data_;

  // impedance and regularizer of the plain rows: imp' (MuJoCo's KBIP[3]) times the change of
  // the impedance's argument: the row's own distance, or the norm of a connect / weld residual
  // (a connect or weld's rows share an island)
  ForRows(0, nplain, [&](int i) {
    double g[6], norm;
    const int n = ImpedanceArgument(p, i, g, &norm);
    double darg = 0;
    if (norm > 0) {
      for (int k = 0; k < n; k++) darg += g[k] * tan_.dpos[i + k];
      darg /= norm;
    }
    for (int k = i; k < i + n; k++) {
      tan_.dimp[k] = d->efc_KBIP[4 * k + 3] * darg;
      tan_.dR[k] = rows_.dR_dimp[k] * tan_.dimp[k];
    }
    return n;
  });

  // contacts: one impedance for all rows, d(dist) on the normal; contacts from distance with the
  // continued impedance and the softplus position term
  ForRows(nplain, p.nrow, [&](int row) {
    const int c = rows_.row_contact[row];
    if (c < 0) return 1;
    const Contact& con = p.con[c];
    const double dposition = rows_.position_slope[c] * tan_.dpos[con.row];
    const double dimp = rows_.imp_slope[c] * tan_.dpos[con.row];
    for (int r = 0; r < con.dim; r++) {
      const int i = con.row + r;
      tan_.dimp[i] = dimp;
      tan_.dR[i] = rows_.dR_dimp[i] * dimp;
      if (!reference) continue;
      double da = tan_.has_dvel ? -p.KB[2 * i + 1] * tan_.dvel[i] : 0;
      if (r == 0) da -= p.KB[2 * i] * (dimp * rows_.position[c] + p.imp[i] * dposition);
      tan_.daref[i] = da;
    }
    return con.dim;
  });

  // reference acceleration of the plain rows: aref = -B vel - K imp (pos - margin)
  if (!reference) return;  // (daref unformed: SmoothTangent::row_reference)
  ForRows(0, nplain, [&](int i) {
    const double K = p.KB[2 * i], B = p.KB[2 * i + 1];
    double da = tan_.has_dvel ? -B * tan_.dvel[i] : 0;
    da -= K * (tan_.dimp[i] * (p.pos[i] - p.margin[i]) + p.imp[i] * tan_.dpos[i]);
    tan_.daref[i] = da;
    return 1;
  });
}

}  // namespace contactkit

namespace contactkit {

void SmoothTangent::SensorTangent(const mjModel* m, int kind, double* ds) {
  mjData* d = pass_data_;
  const mjData* d0 = stage_data_;
  const int nv = nv_;
  const double e = kind == kPos || kind == kParam ? kPosStep : kNudge;

  // state and controls of this direction (positions: the pass left pass_data_ there)
  d->nefc = 0;
  for (int i = 0; i < nv; i++) d->qvel[i] = nominal_.qvel[i] + e * tan_.dv[i];
  for (int i = 0; i < na_; i++) d->act[i] = nominal_.act[i] + e * tan_.dact[i];
  for (int i = 0; i < nu_; i++) d->ctrl[i] = nominal_.ctrl[i] + e * tan_.du[i];
  mj_fwdVelocity(m, d);
  mj_sensorPos(m, d);
  mj_sensorVel(m, d);
  if (acc_sensors_) SensorAccTangent(m, e);
  for (int i = 0; i < ns_; i++) ds[i] = (d->sensordata[i] - d0->sensordata[i]) / e;

  // back to the nominal inputs
  mju_copy(d->qvel, nominal_.qvel, nv);
  mju_copy(d->act, nominal_.act, na_);
  mju_copy(d->ctrl, nominal_.ctrl, nu_);
}

void SmoothTangent::SensorAccTangent(const mjModel* m, double e) {
  mjData* d = pass_data_;
  const mjData* d0 = stage_data_;
  const int nv = nv_;

  // acceleration stage from the linearized solution: actuator forces, qacc, forces, contacts
  mj_fwdActuation(m, d);
  double* da = scratch_.a;
  for (int i = 0; i < nv; i++) da[i] = tan_.dqfrc_smooth[i] + tan_.dqfrc_constraint[i];
  if (tan_.has_dM) {
    // the solvers' qacc is that of the problem's M_eff (damping folded in): its tangent
    FormMass();
    const double* dM = tan_.has_dM_problem && stage_.has_rows ? tan_.dM_problem : tan_.dM;
    for (int r = 0; r < tan_.dM_nrows; r++) {
      const int i = tan_.dM_rows[r];
      int adr = m->dof_Madr[i];
      da[i] -= dM[adr++] * d0->qacc[i];
      for (int j = m->dof_parentid[i]; j >= 0; j = m->dof_parentid[j], adr++) {
        da[i] -= dM[adr] * d0->qacc[j];
        da[j] -= dM[adr] * d0->qacc[i];
      }
    }
  }
  if (stage_.has_rows) {
    stage_.problem->mass.Solve(da);
  } else {
    mj_solveM(m, stage_data_, da, da, 1);
  }
  for (int i = 0; i < nv; i++) {
    d->qacc[i] = d0->qacc[i] + e * da[i];
    d->qfrc_constraint[i] = nominal_.qfrc_constraint[i] + e * tan_.dqfrc_constraint[i];
  }
  // contacts and MuJoCo's rows at this state (in 3.x's arena too), forces of the linearized
  // solution when the contact set is the nominal one; none for sensors that read neither
  if (!acc_rows_) {
    d->ncon = 0;
    d->nefc = 0;
    SensorAcc(m, d);
    return;
  }
  const mjModel* mc = cfd_ ? cfd_model_ : m;
  mj_collision(mc, d);
  mj_makeConstraint(mc, d);
  if (stage_.has_rows && d->ncon == d0->ncon && d->nefc == d0->nefc) {
    const Problem& p = *stage_.problem;
    const bool pyramidal = m->opt.cone == mjCONE_PYRAMIDAL;
    for (int i = 0; i < d->nefc; i++) d->efc_force[i] = 0;
    for (int i = 0; i < p.ne + p.nf + p.nl; i++)
      d->efc_force[i] = stage_.solution->force[i] + e * tan_.dforce[i];
    for (int c = 0; c < p.ncon; c++) {
      const Contact& pc = p.con[c];
      double f[6];
      for (int r = 0; r < pc.dim; r++)
        f[r] = stage_.solution->force[pc.row + r] + e * tan_.dforce[pc.row + r];

      // the same contact here: same pair, nearest point (colliders may reorder a pair's contacts)
      const mjContact& nominal = d0->contact[pc.mj_index];
      int best = -1;
      double best_dist = 0;
      for (int k = 0; k < d->ncon; k++) {
        const mjContact& cand = d->contact[k];
        if (ContactGeom(&cand, 0) != pc.geom[0] || ContactGeom(&cand, 1) != pc.geom[1] ||
            cand.efc_address < 0) {
          continue;
        }
        const double dd = mju_dist3(cand.pos, nominal.pos);
        if (best < 0 || dd < best_dist) {
          best = k;
          best_dist = dd;
        }
      }
      if (best < 0) continue;
      double* out = d->efc_force + d->contact[best].efc_address;
      if (pc.dim == 1 || !pyramidal) {
        for (int r = 0; r < pc.dim; r++) out[r] = f[r];
      } else {
        FrameToPyramid(f, pc.mu, pc.dim, out);
      }
    }
  } else {
    mode_changes_++;
    for (int i = 0; i < d->nefc; i++) d->efc_force[i] = 0;
  }
  SensorAcc(m, d);
}

void SmoothTangent::ParamSensorTangent(mjModel* mp, const ParamSlot& slot, double* ds) {
  // forward difference of the parameter by SensorTangent's step: the position stage of mp there
  const mjtNum value = *slot.field;
  SetParam(mp, slot, value + kPosStep, pass_data_);
  mjData* d = pass_data_;
  mju_copy(d->qpos, nominal_.qpos, nq_);
  mj_kinematics(mp, d);
  mj_comPos(mp, d);
  mj_camlight(mp, d);
  mj_tendon(mp, d);
  MassMatrix(mp, d);
  mj_transmission(mp, d);
  SensorTangent(mp, kParam, ds);
  SetParam(mp, slot, value, pass_data_);
}

}  // namespace contactkit
