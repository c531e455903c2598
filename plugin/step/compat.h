// Copyright 2026 The contactkit developers.
//
// Differences between MuJoCo 2.2.x (Debian) and 3.x, behind one set of names.
#ifndef CONTACTKIT_PLUGIN_COMPAT_H_
#define CONTACTKIT_PLUGIN_COMPAT_H_

#include <mujoco/mujoco.h>

#if !defined(mjVERSION_HEADER)
#error "mujoco.h does not define mjVERSION_HEADER"
#endif

#define CK_MJ3 (mjVERSION_HEADER >= 300)

// exported by MuJoCo but not declared in its header
extern "C" {
#if !CK_MJ3
MJAPI void mj_implicit(const mjModel* m, mjData* d);
MJAPI void mjd_smooth_vel(const mjModel* m, mjData* d);
MJAPI void mj_makeMSparse(const mjModel* m, mjData* d, int* rownnz, int* rowadr, int* colind);
#else
MJAPI void mjd_smooth_vel(const mjModel* m, mjData* d, int flg_bias);
#endif
#if CK_MJ3 && mjVERSION_HEADER >= 3011000
MJAPI int mjd_freeMhat(const mjModel* m, const mjData* d, int jnt, mjtNum h, mjtNum A[36]);
#endif
MJAPI void mj_EulerSkip(const mjModel* m, mjData* d, int skipfactor);
MJAPI void mj_implicitSkip(const mjModel* m, mjData* d, int skipfactor);
}

namespace contactkit {

// geom k (0 or 1) of a contact
inline int ContactGeom(const mjContact* con, int k) {
#if CK_MJ3
  return con->geom[k];
#else
  return k == 0 ? con->geom1 : con->geom2;
#endif
}

// iterations of the last constraint solve in mjData: on 3.x MuJoCo solves each island on its own
// and counts per island (solver_niter, kept for the first mjNISLAND islands), so this is the
// slowest island's count, which without islands (2.x, or 3.x with islands disabled) is the one
// solve's solver_iter / solver_niter[0]
inline int SolverIterations(const mjData* d) {
#if CK_MJ3
  int n = 0;
  for (int i = 0; i < mjNISLAND; i++) n = d->solver_niter[i] > n ? d->solver_niter[i] : n;
  return n;
#else
  return d->solver_iter;
#endif
}

// records the iterations of a solve that was not MuJoCo's (one count, no islands)
inline void SetSolverIterations(mjData* d, int n) {
#if CK_MJ3
  d->solver_niter[0] = n;
  for (int i = 1; i < mjNISLAND; i++) d->solver_niter[i] = 0;
#else
  d->solver_iter = n;
#endif
}

// 1 if the implicit integrator family is selected (implicit, implicitfast on 3.x)
inline bool IsImplicit(const mjModel* m) {
#if CK_MJ3
  return m->opt.integrator == mjINT_IMPLICIT || m->opt.integrator == mjINT_IMPLICITFAST;
#else
  return m->opt.integrator == mjINT_IMPLICIT;
#endif
}

// 1 if the integrator is implicitfast (MuJoCo 3.x): M - h qDeriv without the bias forces'
// velocity derivative (but on standalone free bodies from 3.11: ImplicitFastFreeBlock)
inline bool IsImplicitFast(const mjModel* m) {
#if CK_MJ3
  return m->opt.integrator == mjINT_IMPLICITFAST;
#else
  (void)m;
  return false;
#endif
}

// qDeriv as implicitfast computes it: without the bias forces' derivative
inline void ImplicitFastQDeriv(const mjModel* m, mjData* d) {
#if CK_MJ3
  mjd_smooth_vel(m, d, 0);
#else
  (void)m;
  (void)d;
#endif
}

// implicitfast's block (6x6, row-major) of free joint jnt when its body stands alone and is awake
// (MuJoCo 3.11+ solves it with the gyroscopic terms, as implicit does): M - h (qDeriv + the bias
// forces' derivative), qDeriv as ImplicitFastQDeriv left it in d; false for any other joint
inline bool ImplicitFastFreeBlock(const mjModel* m, const mjData* d, int jnt, mjtNum A[36]) {
#if CK_MJ3 && mjVERSION_HEADER >= 3011000
  return m->jnt_type[jnt] == mjJNT_FREE && mjd_freeMhat(m, d, jnt, m->opt.timestep, A);
#else
  (void)m;
  (void)d;
  (void)jnt;
  (void)A;
  return false;
#endif
}

// 1 if Euler integrates joint damping implicitly
inline bool EulerDampingImplicit(const mjModel* m) {
#if CK_MJ3 && defined(mjDSBL_EULERDAMP)
  if (m->opt.disableflags & mjDSBL_EULERDAMP) return false;
#endif
  for (int i = 0; i < m->nv; i++) {
    if (m->dof_damping[i] > 0) return true;
  }
  return false;
}

// 1 if the constraint stage writes qacc_warmstart (MuJoCo < 3.3.6); from 3.3.6 the integrator's
// mj_advance copies qacc into it once per step instead
constexpr bool kStageWritesWarmstart = mjVERSION_HEADER < 336;

// 1 if mjd_smooth_vel leaves out actuators whose force is clamped by forcerange (MuJoCo 3.5+)
constexpr bool kQDerivSkipsClamped = mjVERSION_HEADER >= 350;

// 1 if actuator i's force is at or beyond its forcerange (the force does not move with v or u)
inline bool ActuatorForceClamped(const mjModel* m, int i, double force) {
  const double* range = m->actuator_forcerange + 2 * i;
  return m->actuator_forcelimited[i] && (force <= range[0] || force >= range[1]);
}

// 1 if an energy sensor computes the energy term (MuJoCo 3.x skips mj_energyPos/Vel then)
inline bool EnergyFromSensor(const mjModel* m, int type) {
#if CK_MJ3
  if (m->opt.disableflags & mjDSBL_SENSOR) return false;
  for (int i = 0; i < m->nsensor; i++) {
    if (m->sensor_type[i] == type) return true;
  }
#endif
  return false;
}

// d->qDeriv = d(qfrc_passive + qfrc_actuator - qfrc_bias)/d qvel in the sparse layout of
// DRowNnz/DRowAdr/DColInd (rows of M's pattern, both triangles)
inline void SmoothVelDerivative(const mjModel* m, mjData* d) {
#if CK_MJ3
  mjd_smooth_vel(m, d, 1);
#else
  mj_makeMSparse(m, d, d->D_rownnz, d->D_rowadr, d->D_colind);
  mjd_smooth_vel(m, d);
#endif
}
#if CK_MJ3
inline const int* DRowNnz(const mjModel* m, const mjData*) { return m->D_rownnz; }
inline const int* DRowAdr(const mjModel* m, const mjData*) { return m->D_rowadr; }
inline const int* DColInd(const mjModel* m, const mjData*) { return m->D_colind; }
#else
inline const int* DRowNnz(const mjModel*, const mjData* d) { return d->D_rownnz; }
inline const int* DRowAdr(const mjModel*, const mjData* d) { return d->D_rowadr; }
inline const int* DColInd(const mjModel*, const mjData* d) { return d->D_colind; }
#endif

// joint springs and dampers switched off (3.x has a flag for each, 2.x one for both)
inline bool SpringsDisabled(const mjModel* m) {
#if CK_MJ3
  return m->opt.disableflags & mjDSBL_SPRING;
#else
  return m->opt.disableflags & mjDSBL_PASSIVE;
#endif
}
inline bool DampersDisabled(const mjModel* m) {
#if CK_MJ3
  return m->opt.disableflags & mjDSBL_DAMPER;
#else
  return m->opt.disableflags & mjDSBL_PASSIVE;
#endif
}

// dense row i (nv) of the actuator moment matrix (sparse on 3.x, dense nu x nv on 2.x)
inline void ActuatorMoment(const mjModel* m, const mjData* d, int i, mjtNum* out) {
#if CK_MJ3
  mju_zero(out, m->nv);
  const int adr = d->moment_rowadr[i];
  for (int k = 0; k < d->moment_rownnz[i]; k++) {
    out[d->moment_colind[adr + k]] = d->actuator_moment[adr + k];
  }
#else
  mju_copy(out, d->actuator_moment + static_cast<size_t>(i) * m->nv, m->nv);
#endif
}

// 1 if actuator i's force reaches qfrc_actuator unclamped and unmasked: no actuator group
// disabled for it and no joint or tendon actuator-force limit in the model (3.x only)
inline bool ActuatorForcePassesThrough(const mjModel* m, int i) {
#if CK_MJ3
  const int group = m->actuator_group[i];
  if (group >= 0 && group <= 30 && (m->opt.disableactuator & (1 << group))) return false;
  for (int j = 0; j < m->njnt; j++) {
    if (m->jnt_actfrclimited[j]) return false;
  }
  for (int t = 0; t < m->ntendon; t++) {
    if (m->tendon_actfrclimited[t]) return false;
  }
#else
  (void)m;
  (void)i;
#endif
  return true;
}

// after geom margins or gaps were changed in a compiled model: MuJoCo 3.x's midphase tests bodies'
// bounding volumes with body_margin, which the compiler fills in and nothing updates afterwards
// (pairs beyond the old margin are never seen): the largest geom margin of each body, from 3.11
// the largest margin + gap (contacts are detected up to margin + gap from 3.9); 2.x tests geoms
// directly
inline void SyncBodyMargins(mjModel* m) {
#if CK_MJ3
  for (int b = 0; b < m->nbody; b++) {
    mjtNum margin = 0;
    for (int g = m->body_geomadr[b]; g >= 0 && g < m->body_geomadr[b] + m->body_geomnum[b]; g++) {
#if mjVERSION_HEADER >= 3011000
      margin = mju_max(margin, m->geom_margin[g] + m->geom_gap[g]);
#else
      margin = mju_max(margin, m->geom_margin[g]);
#endif
    }
    m->body_margin[b] = margin;
  }
#else
  (void)m;
#endif
}

// composite rigid body inertia into qM (mj_crb on 2.x, mj_makeM on 3.x)
inline void MassMatrix(const mjModel* m, mjData* d) {
#if CK_MJ3
  mj_makeM(m, d);
#else
  mj_crb(m, d);
#endif
}

// MuJoCo's joint-space inertia in its legacy sparse layout (m->nM values; row i at dof_Madr[i],
// then its ancestors): d->qM before 3.11; from 3.11 (qM removed) gathered from the CSR d->M through
// m->mapM2M, which names each CSR entry's legacy index
inline void CopyLegacyM(const mjModel* m, const mjData* d, mjtNum* dst) {
#if mjVERSION_HEADER >= 3011000
  mju_zero(dst, static_cast<int>(m->nM));
  for (int k = 0; k < m->nC; k++) dst[m->mapM2M[k]] = d->M[k];
#else
  mju_copy(dst, d->qM, static_cast<int>(m->nM));
#endif
}

// entries of d->qLD (nM on 2.x; the CSR pattern's nC on 3.x)
inline int InertiaFactorSize(const mjModel* m) {
#if CK_MJ3
  return static_cast<int>(m->nC);
#else
  return m->nM;
#endif
}

// dense nv x nv joint-space inertia of d (mj_fullM; its arguments changed in 3.10)
inline void FullInertia(const mjModel* m, const mjData* d, mjtNum* dst) {
#if mjVERSION_HEADER >= 3010000
  mj_fullM(m, d, dst);
#else
  mj_fullM(m, dst, d->qM);
#endif
}

// MuJoCo's estimate of diag(J M^-1 J') for constraint row i (efc_diagApprox; efc_diagA from 3.10)
inline mjtNum EfcDiagApprox(const mjData* d, int i) {
#if mjVERSION_HEADER >= 3010000
  return d->efc_diagA[i];
#else
  return d->efc_diagApprox[i];
#endif
}

// narrowphase of geoms g1, g2 (mjCOLLISIONFUNC) into con (mjMAXCONPAIR): dist, pos and the frame's
// normal and first tangent as the collider set them (the rest of the frame zero); from 3.9 the
// colliders write mjPreContact, copied here
inline int CollideGeomPair(const mjModel* m, mjData* d, int g1, int g2, mjtNum margin,
                           mjContact* con) {
  const int t1 = m->geom_type[g1], t2 = m->geom_type[g2];
#if mjVERSION_HEADER >= 3009000
  mjPreContact pre[mjMAXCONPAIR];
  const int n = mjCOLLISIONFUNC[t1][t2](m, d, pre, g1, g2, margin);
  for (int i = 0; i < n; i++) {
    con[i].dist = pre[i].dist;
    mju_copy3(con[i].pos, pre[i].pos);
    mju_copy3(con[i].frame, pre[i].normal);
    mju_copy3(con[i].frame + 3, pre[i].tangent);
    mju_zero3(con[i].frame + 6);
  }
  return n;
#else
  return mjCOLLISIONFUNC[t1][t2](m, d, con, g1, g2, margin);
#endif
}

// the type of mjd_transitionFD's flg_centered (mjtByte before 3.9, then mjtBool)
#if mjVERSION_HEADER >= 3009000
using CenteredFlag = mjtBool;
#else
using CenteredFlag = mjtByte;
#endif

// mjv_moveCamera (its scene argument went away in 3.11)
inline void MoveCamera(const mjModel* m, int action, mjtNum dx, mjtNum dy, const mjvScene* scn,
                       mjvCamera* cam) {
#if mjVERSION_HEADER >= 3011000
  (void)scn;
  mjv_moveCamera(m, action, dx, dy, cam);
#else
  mjv_moveCamera(m, action, dx, dy, scn, cam);
#endif
}

// acceleration-stage sensors; from 3.5 mj_sensorAcc runs mj_rnePostConstraint only while
// flg_rnepost is clear (mj_forward clears it first), so without this the accelerometer, force,
// torque and user sensors would keep their first values
inline void SensorAcc(const mjModel* m, mjData* d) {
#if mjVERSION_HEADER >= 3005000
  d->flg_rnepost = 0;
#endif
  mj_sensorAcc(m, d);
}

// 1 if MuJoCo subtracts Jdot v from the reference acceleration of an active connect or weld
// equality of d (3.7 on)
inline bool JdotvInReference(const mjModel* m, const mjData* d) {
#if mjVERSION_HEADER >= 3007000
  for (int i = 0; i < m->neq; i++) {
    if (d->eq_active[i] && (m->eq_type[i] == mjEQ_CONNECT || m->eq_type[i] == mjEQ_WELD)) {
      return true;
    }
  }
#else
  (void)m;
  (void)d;
#endif
  return false;
}

// Margins and gaps of geom pairs, the one rule of contactkit for every MuJoCo version. A pair's
// margin and gap are an explicit <pair>'s, else combined from its geoms: the larger of the two
// before MuJoCo 3.5, their sum from 3.5 on; opt.o_margin replaces the margin under the override
// flag. Contacts are reported up to the detection distance (the margin before 3.9, margin + gap
// from 3.9) and carry force below the inclusion margin (margin - gap before 3.9, the margin from
// 3.9). contactkit's own margins (ck-run --margin, contacts from distance) are per pair: each geom
// gets GeomMarginShare of it, so that a pair of such geoms gets the whole.
struct PairMargins {
  double detect;   // distance up to which the colliders report contacts
  double include;  // distance below which a contact is a constraint (mjContact.includemargin)
};

// margin of a pair whose geoms have margins (or gaps) a and b
inline double CombineGeomMargins(double a, double b) {
#if mjVERSION_HEADER >= 3005000
  return a + b;
#else
  return a > b ? a : b;
#endif
}

// what to give every geom so that a pair of such geoms gets w (the whole w before 3.5, half after)
inline double GeomMarginShare(double w) {
#if mjVERSION_HEADER >= 3005000
  return 0.5 * w;
#else
  return w;
#endif
}

// margins of the contacts of geoms g1, g2 as mj_collision sets them
inline PairMargins GeomPairMargins(const mjModel* m, int g1, int g2) {
  double margin = CombineGeomMargins(m->geom_margin[g1], m->geom_margin[g2]);
  double gap = CombineGeomMargins(m->geom_gap[g1], m->geom_gap[g2]);
  for (int k = 0; k < m->npair; k++) {
    if ((m->pair_geom1[k] == g1 && m->pair_geom2[k] == g2) ||
        (m->pair_geom1[k] == g2 && m->pair_geom2[k] == g1)) {
      margin = m->pair_margin[k];
      gap = m->pair_gap[k];
      break;
    }
  }
  if (mjENABLED(mjENBL_OVERRIDE)) margin = m->opt.o_margin;
#if mjVERSION_HEADER >= 3009000
  return {margin + gap, margin};
#else
  return {margin, margin - gap};
#endif
}

// every geom pair (dynamic, explicit, overridden) detects and includes contacts closer than margin
inline void SetPairMargins(mjModel* m, double margin) {
  for (int g = 0; g < m->ngeom; g++) {
    m->geom_margin[g] = GeomMarginShare(margin);
    m->geom_gap[g] = 0;
  }
  for (int k = 0; k < m->npair; k++) {
    m->pair_margin[k] = margin;
    m->pair_gap[k] = 0;
  }
  m->opt.o_margin = margin;
  SyncBodyMargins(m);
}

// every geom pair's detection distance and inclusion margin grow by w (gaps unchanged)
inline void WidenPairMargins(mjModel* m, double w) {
  for (int g = 0; g < m->ngeom; g++) m->geom_margin[g] += GeomMarginShare(w);
  for (int k = 0; k < m->npair; k++) m->pair_margin[k] += w;
  m->opt.o_margin += w;
  SyncBodyMargins(m);
}

// a MuJoCo warning with contactkit's prefix
inline void Warn(const char* msg) {
#if CK_MJ3
  mju_warning("contactkit: %s", msg);
#else
  mju_warning_s("contactkit: %s", msg);
#endif
}

}  // namespace contactkit

#endif  // CONTACTKIT_PLUGIN_COMPAT_H_
