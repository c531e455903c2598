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

#if !CK_MJ3
// exported by MuJoCo 2.2.2 but not declared in its header
extern "C" {
MJAPI void mj_implicit(const mjModel* m, mjData* d);
}
#endif

namespace contactkit {

// geom k (0 or 1) of a contact
inline int ContactGeom(const mjContact* con, int k) {
#if CK_MJ3
  return con->geom[k];
#else
  return k == 0 ? con->geom1 : con->geom2;
#endif
}

// solver iterations of the last mj_fwdConstraint (island 0 on 3.x, summed over islands)
inline int SolverIterations(const mjData* d) {
#if CK_MJ3
  int n = 0;
  for (int i = 0; i < mjNISLAND; i++) n += d->solver_niter[i];
  return n;
#else
  return d->solver_iter;
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

}  // namespace contactkit

#endif  // CONTACTKIT_PLUGIN_COMPAT_H_
