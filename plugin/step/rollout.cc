// Copyright 2026 The contactkit developers.
//
// ck_rollout: batches of open-loop rollouts with ck_step on a pool of threads, with the
// conventions of MuJoCo's Python rollout (mujoco.rollout): full-physics states, per-step inputs
// of a control spec, state and sensor trajectories, a rollout ending early on a MuJoCo warning
// repeating its last outputs.
#include <atomic>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "contactkit/contactkit.h"
#include "plugin/config/settings_table.h"
#include "plugin/step/compat.h"

namespace {

using contactkit::SetError;

#if CK_MJ3
bool AnyWarning(const mjData* d) {
  for (int i = 0; i < mjNWARNING; i++) {
    if (d->warning[i].number) return true;
  }
  return false;
}

// rollout r on one thread's handle and data
void RollOne(const mjModel* m, ckHandle* ck, mjData* d, long r, int nstep, int control_spec,
             const mjtNum* state0, const mjtNum* warmstart0, const mjtNum* control, mjtNum* state,
             mjtNum* sensordata) {
  const long nstate = mj_stateSize(m, mjSTATE_FULLPHYSICS);
  const long ncontrol = mj_stateSize(m, control_spec);
  const long nv = m->nv, ns = m->nsensordata;

  // inputs the control spec does not set take the model's defaults
  if (!(control_spec & mjSTATE_CTRL)) mju_zero(d->ctrl, m->nu);
  if (!(control_spec & mjSTATE_QFRC_APPLIED)) mju_zero(d->qfrc_applied, m->nv);
  if (!(control_spec & mjSTATE_XFRC_APPLIED)) mju_zero(d->xfrc_applied, 6 * m->nbody);
  for (int i = 0; i < m->nbody; i++) {
    const int id = m->body_mocapid[i];
    if (id < 0) continue;
    if (!(control_spec & mjSTATE_MOCAP_POS)) mju_copy3(d->mocap_pos + 3 * id, m->body_pos + 3 * i);
    if (!(control_spec & mjSTATE_MOCAP_QUAT)) {
      mju_copy4(d->mocap_quat + 4 * id, m->body_quat + 4 * i);
    }
  }
  if (!(control_spec & mjSTATE_EQ_ACTIVE)) {
    for (int i = 0; i < m->neq; i++) d->eq_active[i] = m->eq_active0[i];
  }

  // initial state, warm start, and a handle that carries nothing from another rollout
  mj_setState(m, d, state0 + r * nstate, mjSTATE_FULLPHYSICS);
  if (warmstart0) {
    mju_copy(d->qacc_warmstart, warmstart0 + r * nv, m->nv);
  } else {
    mju_zero(d->qacc_warmstart, m->nv);
  }
  for (int i = 0; i < mjNWARNING; i++) d->warning[i].number = 0;
  ck_reset(ck);

  for (long t = 0; t < nstep; t++) {
    const long step = r * nstep + t;
    // a warning (diverged, reset by MuJoCo) ends the rollout: the last outputs repeat
    const bool stop = AnyWarning(d);
    if (!stop) {
      if (control) mj_setState(m, d, control + step * ncontrol, control_spec);
      ck_step(ck, m, d);
    }
    if (state) mj_getState(m, d, state + step * nstate, mjSTATE_FULLPHYSICS);
    if (sensordata) mju_copy(sensordata + step * ns, d->sensordata, m->nsensordata);
  }
}
#endif

}  // namespace

int ck_rollout(const mjModel* m, ckHandle** handles, mjData** datas, int nthread, int nroll,
               int nstep, int control_spec, const mjtNum* state0, const mjtNum* warmstart0,
               const mjtNum* control, mjtNum* state, mjtNum* sensordata, char* error,
               int error_sz) {
#if !CK_MJ3
  SetError(error, error_sz,
           "ck_rollout needs MuJoCo 3.x (its states are mj_getState's); this build uses " +
               std::string(mj_versionString()));
  return -1;
#else
  if (!m || !handles || !datas || !state0) {
    SetError(error, error_sz, "ck_rollout: m, handles, datas and state0 are required");
    return -1;
  }
  if (nthread < 1 || nroll < 0 || nstep < 0) {
    SetError(error, error_sz,
             "ck_rollout: nthread must be >= 1 and nroll, nstep >= 0 (got nthread " +
                 std::to_string(nthread) + ", nroll " + std::to_string(nroll) + ", nstep " +
                 std::to_string(nstep) + ")");
    return -1;
  }
  if (control_spec & ~mjSTATE_USER) {
    SetError(error, error_sz,
             "ck_rollout: control_spec " + std::to_string(control_spec) +
                 " has bits outside mjSTATE_USER (ctrl, qfrc_applied, xfrc_applied, mocap, "
                 "eq_active)");
    return -1;
  }
  for (int k = 0; k < nthread; k++) {
    if (!handles[k] || !datas[k]) {
      SetError(error, error_sz, "ck_rollout: handle or data " + std::to_string(k) + " is NULL");
      return -1;
    }
  }
  // rollouts are handed out one at a time: each thread's results depend only on its inputs
  std::atomic<long> next(0);
  auto worker = [&](int k) {
    for (long r = next++; r < nroll; r = next++) {
      RollOne(m, handles[k], datas[k], r, nstep, control_spec, state0, warmstart0, control, state,
              sensordata);
    }
  };
  const int nrun = nthread < nroll ? nthread : (nroll > 0 ? nroll : 1);
  if (nrun == 1) {
    worker(0);
  } else {
    std::vector<std::thread> pool;
    for (int k = 0; k < nrun; k++) pool.emplace_back(worker, k);
    for (std::thread& t : pool) t.join();
  }
  SetError(error, error_sz, "");
  return 0;
#endif
}
