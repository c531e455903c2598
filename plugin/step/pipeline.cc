// Copyright 2026 The contactkit developers.
//
// ck_forward and ck_step: MuJoCo's stage sequence with the selected solver in place of
// mj_fwdConstraint, and the model's integrator. RK4 runs its own stage loop so that all four
// stages use the selected solver (mj_RungeKutta would call MuJoCo's solver).
#include <chrono>
#include <cmath>

#include "plugin/step/compat.h"
#include "plugin/step/handle.h"
#include "plugin/step/integrator.h"
#include "solvers/lcp/lcp.h"

#if CK_MJ3
#define CK_SENS_E_POTENTIAL mjSENS_E_POTENTIAL
#define CK_SENS_E_KINETIC mjSENS_E_KINETIC
#else
#define CK_SENS_E_POTENTIAL (-1)
#define CK_SENS_E_KINETIC (-1)
#endif

namespace contactkit {
namespace {

#if !CK_MJ3
// MuJoCo's timer clock (0 without mjcb_time, as MuJoCo's own timers)
mjtNum TimerNow() { return mjcb_time ? mjcb_time() : 0; }

void AddTimer(mjData* d, int timer, mjtNum start) {
  d->timer[timer].duration += TimerNow() - start;
  d->timer[timer].number++;
}
#endif

// MuJoCo's position stage. With one of our solvers it leaves out mj_projectConstraint, which
// MuJoCo 2.x runs for PGS and noslip models only: efc_AR = J M^-1 J' (dense nefc x nefc, or a
// sparse product), superlinear in the rows and read by PGS and noslip alone, never by our solvers
// (1.2 ms of a 2.9 ms comfree step at 630 contacts). MuJoCo 3.x's stage has more parts (islands,
// flexes, sleeping), so it runs whole there.
void FwdPosition(const ckHandle* ck, const mjModel* m, mjData* d) {
#if !CK_MJ3
  if (ck->solver && (m->opt.solver == mjSOL_PGS || m->opt.noslip_iterations > 0)) {
    const mjtNum start = TimerNow();
    mjtNum t = start;
    auto lap = [&](int timer) {  // the time since the last lap into MuJoCo's timer
      AddTimer(d, timer, t);
      t = TimerNow();
    };
    mj_kinematics(m, d);
    mj_comPos(m, d);
    mj_camlight(m, d);
    mj_tendon(m, d);
    lap(mjTIMER_POS_KINEMATICS);
    mj_crb(m, d);
    mj_factorM(m, d);
    lap(mjTIMER_POS_INERTIA);
    mj_collision(m, d);
    lap(mjTIMER_POS_COLLISION);
    mj_makeConstraint(m, d);
    mj_transmission(m, d);
    lap(mjTIMER_POS_MAKE);
    AddTimer(d, mjTIMER_POSITION, start);
    return;
  }
#endif
  mj_fwdPosition(m, d);
}

// Problem::regap through the handle's extractor and scratch mjData
bool Regap(void* context, const Problem& p, const double* v_next, double* pos_next,
           double* jac_next) {
  ckRegap_* r = static_cast<ckRegap_*>(context);
  return r->extractor->Regap(r->m, r->d, r->scratch, p, v_next, pos_next, jac_next);
}

bool AllFinite(const double* x, int n) {
  for (int i = 0; i < n; i++) {
    if (!std::isfinite(x[i])) return false;
  }
  return true;
}

// statistics that do not depend on the solver
void ContactStats(ckStats* st, const mjData* d) {
  mjtNum pen = 0;
  int ncon = 0;
  for (int i = 0; i < d->ncon; i++) {
    if (d->contact[i].efc_address < 0) continue;
    ncon++;
    pen = mju_max(pen, -d->contact[i].dist);
  }
  st->ncon = ncon;
  st->max_penetration = pen;
}

#if CK_MJ3
// one activation step of actuator i (MuJoCo 3.x's nextActivation)
mjtNum NextActivation(const mjModel* m, const mjData* d, int i, int adr, mjtNum act_dot) {
  mjtNum act = d->act[adr];
  if (m->actuator_dyntype[i] == mjDYN_FILTEREXACT) {
    const mjtNum tau = mju_max(mjMINVAL, m->actuator_dynprm[i * mjNDYN]);
    act = act + act_dot * tau * (1 - mju_exp(-m->opt.timestep / tau));
  } else {
    act = act + act_dot * m->opt.timestep;
  }
  return ClipActivation(m, i, act, nullptr);
}

// actuator i is in a disabled group
bool ActuatorDisabled(const mjModel* m, int i) {
  const int group = m->actuator_group[i];
  return group >= 0 && group <= 30 && (m->opt.disableactuator & (1 << group));
}
#endif

// semi-implicit update of act, qvel, qpos, time (MuJoCo's static mj_advance)
void Advance(const mjModel* m, mjData* d, const mjtNum* act_dot, const mjtNum* qacc,
             const mjtNum* qvel) {
#if CK_MJ3
  if (m->na && !mjDISABLED(mjDSBL_ACTUATION)) {
    for (int i = 0; i < m->nu; i++) {
      const int begin = m->actuator_actadr[i], end = begin + m->actuator_actnum[i];
      for (int j = begin; j < end; j++) {
        d->act[j] = NextActivation(m, d, i, j, ActuatorDisabled(m, i) ? 0 : act_dot[j]);
      }
    }
  }
#else
  if (m->na) {
    mju_addToScl(d->act, act_dot, m->opt.timestep, m->na);
    for (int i = 0; i < m->na; i++) {
      d->act[i] = ClipActivation(m, i + m->nu - m->na, d->act[i], nullptr);
    }
  }
#endif
  mju_addToScl(d->qvel, qacc, m->opt.timestep, m->nv);
  mj_integratePos(m, d->qpos, qvel ? qvel : d->qvel, m->opt.timestep);
  d->time += m->opt.timestep;
#if CK_MJ3
  for (int i = 0; i < m->nplugin; i++) {
    const mjpPlugin* plugin = mjp_getPluginAtSlot(m->plugin[i]);
    if (plugin && plugin->advance) plugin->advance(m, d, i);
  }
#endif
  if (!kStageWritesWarmstart) mju_copy(d->qacc_warmstart, d->qacc, m->nv);
}

// MuJoCo's mj_RungeKutta(m, d, 4) with ck_forwardSkip in the stages
void RungeKutta4(ckHandle* ck, const mjModel* m, mjData* d) {
  const int nv = m->nv, nq = m->nq, na = m->na, N = 4;
  const mjtNum h = m->opt.timestep, time = d->time;
  mjtNum C[3], T[3], *X[4], *F[4];
  const mjtNum* A = kRK4A;
  const mjtNum* B = kRK4B;

  // scratch from the handle
  mjtNum* buf = ck->rk.data();
  for (int i = 0; i < N; i++) {
    X[i] = buf;
    buf += nq + nv + na;
    F[i] = buf;
    buf += nv + na;
  }
  mjtNum* dX = buf;

  // the stages after the first record neither contact anchors nor a position correction: those
  // of the step's start stand
  ck->hold_stage = true;

  for (int i = 1; i < N; i++) {
    C[i - 1] = 0;
    for (int j = 0; j < i; j++) C[i - 1] += A[(i - 1) * (N - 1) + j];
    T[i - 1] = d->time + C[i - 1] * h;
  }

  // X[0], F[0] from the forward pass already done
  mju_copy(X[0], d->qpos, nq);
  mju_copy(X[0] + nq, d->qvel, nv);
  mju_copy(F[0], d->qacc, nv);
  if (na) {
    mju_copy(X[0] + nq + nv, d->act, na);
    mju_copy(F[0] + nv, d->act_dot, na);
  }

  for (int i = 1; i < N; i++) {
    mju_zero(dX, 2 * nv + na);
    for (int j = 0; j < i; j++) {
      mju_addToScl(dX, X[j] + nq, A[(i - 1) * (N - 1) + j], nv);
      mju_addToScl(dX + nv, F[j], A[(i - 1) * (N - 1) + j], nv + na);
    }
    mju_copy(X[i], X[0], nq + nv + na);
    mj_integratePos(m, X[i], dX, h);
    mju_addToScl(X[i] + nq, dX + nv, h, nv + na);

    mju_copy(d->qpos, X[i], nq);
    mju_copy(d->qvel, X[i] + nq, nv);
    if (na) mju_copy(d->act, X[i] + nq + nv, na);
    d->time = T[i - 1];

    ForwardSkip(ck, m, d, mjSTAGE_NONE, 1);
    mju_copy(F[i], d->qacc, nv);
    if (na) mju_copy(F[i] + nv, d->act_dot, na);
  }

  mju_zero(dX, 2 * nv + na);
  for (int j = 0; j < N; j++) {
    mju_addToScl(dX, X[j] + nq, B[j], nv);
    mju_addToScl(dX + nv, F[j], B[j], nv + na);
  }

  d->time = time;
  mju_copy(d->qpos, X[0], nq);
  mju_copy(d->qvel, X[0] + nq, nv);
  mju_copy(d->act, X[0] + nq + nv, na);
  Advance(m, d, dX + 2 * nv, dX + nv, dX);
  ck->hold_stage = false;
}

// entry (r, c) of x in MuJoCo's D pattern (row r: its dof's ancestors and descendants, columns
// ascending); (r, c) must be in the pattern
mjtNum& DEntry(const mjModel* m, const mjData* d, mjtNum* x, int r, int c) {
  const int* colind = DColInd(m, d) + DRowAdr(m, d)[r];
  int k = 0;
  while (colind[k] != c) k++;
  return x[DRowAdr(m, d)[r] + k];
}

// false if MuJoCo's implicit integrator would reach mju_error at d, a fatal error under its
// default handler: its LU of M - h qDeriv, eliminated from the last dof to the first on the tree
// pattern without pivoting, meets a pivot below mjMINVAL. The same eliminations in the same order
// as MuJoCo's, so the same pivots. Computes d->qDeriv (the integrator computes it again); lu
// (nD) and mass (nM) are scratch
bool ImplicitFactorable(const mjModel* m, mjData* d, mjtNum* lu, mjtNum* mass) {
  SmoothVelDerivative(m, d);
  CopyLegacyM(m, d, mass);
  const int nD = m->nD;
  for (int k = 0; k < nD; k++) lu[k] = 0;
  for (int i = 0; i < m->nv; i++) {
    int adr = m->dof_Madr[i];
    DEntry(m, d, lu, i, i) = mass[adr++];
    for (int j = m->dof_parentid[i]; j >= 0; j = m->dof_parentid[j], adr++) {
      DEntry(m, d, lu, i, j) = mass[adr];
      DEntry(m, d, lu, j, i) = mass[adr];
    }
  }
  for (int k = 0; k < nD; k++) lu[k] += d->qDeriv[k] * -m->opt.timestep;
  // dof i eliminated: rows j < i with (j, i) set are its ancestors, and so are the columns k < i
  // with (i, k) set
  for (int i = m->nv - 1; i >= 0; i--) {
    const mjtNum pivot = DEntry(m, d, lu, i, i);
    if (!(std::fabs(pivot) >= mjMINVAL)) return false;
    for (int j = m->dof_parentid[i]; j >= 0; j = m->dof_parentid[j]) {
      mjtNum& ji = DEntry(m, d, lu, j, i);
      ji = ji / pivot;
      for (int k = m->dof_parentid[i]; k >= 0; k = m->dof_parentid[k])
        DEntry(m, d, lu, j, k) -= DEntry(m, d, lu, i, k) * ji;
    }
  }
  return true;
}

}  // namespace

bool UsesAnchors(const ckHandle* ck) {
  return ck->solver && ck->settings.solver == ckSOL_COMFREE && ck->settings.comfree.anchor;
}

void ConstraintStage(ckHandle* ck, const mjModel* m, mjData* d) {
  const auto start = std::chrono::steady_clock::now();
  ckStats& st = ck->stats;
  st.solver = ck->settings.solver;
  // RK4 stages after the first (hold_stage) record nothing: the step keeps its start's anchors
  // and position correction
  const bool anchored = UsesAnchors(ck), record = !ck->hold_stage;
  if (anchored && record) ck->anchors.RecordNone();  // replaced below by the solve's contacts
  if (record) ck->position_pending = false;

  // MuJoCo's own solver
  if (!ck->solver) {
    mj_fwdConstraint(m, d);
    st.status = ckSTATUS_SOLVED;
    st.iterations = SolverIterations(d);
    st.nrow = d->nefc;
    st.nisland = 0;
    st.residual = st.kappa = st.condition = 0;
  } else if (d->nefc == 0) {
    // no constraints: as MuJoCo
    const int nv = m->nv;
    mju_copy(d->qacc, d->qacc_smooth, nv);
    if (kStageWritesWarmstart) mju_copy(d->qacc_warmstart, d->qacc_smooth, nv);
    mju_zero(d->qfrc_constraint, nv);
    st.status = ckSTATUS_SOLVED;
    st.iterations = st.nrow = st.nisland = 0;
    st.residual = st.kappa = st.condition = 0;
  } else {
    Problem& p = ck->storage.problem();
    Solution& sol = ck->storage.solution();
    if (ck->extractor.Extract(m, d, &p) > 0) {
      WarnOnceMsg(ck, kWarnCapacity,
                  "more constraints than the handle's capacity; extra contacts left out (raise "
                  "njmax/nconmax in <size>)");
    }
    sol.Reset();
    p.disp = anchored ? ck->anchors.Displacements(d, p) : nullptr;
    p.regap = nullptr;
    if (ck->regap.scratch) {
      ck->regap.m = m;
      ck->regap.d = d;
      ck->regap.extractor = &ck->extractor;
      p.regap = &Regap;
      p.regap_context = &ck->regap;
    }
    bool ok = ProblemIsFinite(p);
    if (!ok) {
      sol.status = ckSTATUS_INVALID_INPUT;
      WarnOnceMsg(ck, kWarnInvalid,
                  "constraint problem has non-finite data (NaN/Inf in state, controls or model); "
                  "constraint forces set to zero");
    } else {
      ck->solver->Solve(p, &sol);
      ok = AllFinite(sol.force, p.nrow) && AllFinite(sol.v_next, p.nv);
      if (!ok) {
        sol.status = ckSTATUS_NUMERICAL;
        WarnOnceMsg(ck, kWarnNumerical,
                    "solver produced non-finite forces; constraint forces set to zero");
      } else if (sol.status == ckSTATUS_NUMERICAL || sol.status == ckSTATUS_MAX_ITER) {
        WarnOnceMsg(ck, kWarnNumerical,
                    sol.status == ckSTATUS_NUMERICAL
                        ? "solver had a numerical failure; best iterate kept"
                        : "solver reached its iteration limit; best iterate kept");
      }
    }
    if (anchored && ok && record) ck->anchors.Record(d, p, sol.anchor_disp);
    if (record) {
      // the step's position correction (lcp's split impulse), applied after the integrator
      ck->position_pending = ok && sol.position_correction;
      if (ck->position_pending) mju_copy(ck->position_fix.data(), sol.position_correction, p.nv);
    }
    if (!ok) {
      sol.edge_force = nullptr;
      for (int i = 0; i < p.nrow; i++) sol.force[i] = 0;
      for (int i = 0; i < p.nv; i++) sol.v_next[i] = p.v_free[i];
    }
    ck->extractor.WriteBack(m, d, p, sol);
    SetSolverIterations(d, sol.iterations);
    st.status = sol.status;
    st.iterations = sol.iterations;
    st.nrow = p.nrow;
    st.nisland = p.islands.nisland;
    st.residual = sol.residual;
    st.kappa = sol.kappa;
    st.condition = sol.condition;
    if (const LcpStats* lcp = LcpSolverStats(ck->solver.get())) {
      ck->totals.guess_tries += lcp->guess_tried;
      ck->totals.guess_hits += lcp->guess_tried && lcp->guess_all_hit;
    }
  }
  ContactStats(&st, d);
  ck->totals.solves++;
  ck->totals.inexact += st.status != ckSTATUS_SOLVED;
  st.solve_time = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  // MuJoCo's constraint timer, as mj_fwdConstraint keeps it (it times itself when passed through)
  if (ck->solver) {
    d->timer[mjTIMER_CONSTRAINT].duration += st.solve_time * 1e3;
    d->timer[mjTIMER_CONSTRAINT].number++;
  }
}

int Resets(const mjData* d) {
  return d->warning[mjWARN_BADQPOS].number + d->warning[mjWARN_BADQVEL].number +
         d->warning[mjWARN_BADQACC].number;
}

void StepSkip(ckHandle* ck, const mjModel* m, mjData* d, int skipstage, int skipsensor) {
  // a reset (mj_resetData) clears the position and velocity results and the integrator's
  // factorization that skipped stages reuse (the implicit integrator would then factor
  // M - h D with M = 0, a fatal mju_error): after a reset nothing is skipped
  ck->step_refused = false;
  const int resets = Resets(d);
  mj_checkPos(m, d);
  mj_checkVel(m, d);
  if (Resets(d) != resets) skipstage = mjSTAGE_NONE;
  ForwardSkip(ck, m, d, skipstage, skipsensor);
  mj_checkAcc(m, d);
  if (Resets(d) != resets) skipstage = mjSTAGE_NONE;
  if (mjENABLED(mjENBL_FWDINV)) mj_compareFwdInv(m, d);

  if (ck->settings.integrator != ckINT_MODEL) {
    if (!ck->adaptive.Step(ck, m, d)) {
      const ckStepInfo& info = ck->adaptive.info();
      SetLastError(ck, "ck_step",
                   "the %s step from t = %g did not reach its end: %s (%d accepted, %d "
                   "rejected internal steps); the state is left at the step's start. Loosen rtol "
                   "/ atol, or raise max_steps / lower min_step",
                   info.integrator == ckINT_DOPRI5 ? "dopri5" : "tsit5", d->time,
                   info.status == ckADAPT_MAX_STEPS ? "max_steps internal steps were not enough"
                                                    : "the controller asked for a step below "
                                                      "min_step",
                   info.accepted, info.rejected);
      WarnOnceMsg(ck, kWarnAdaptive, ck->error);
    }
    return;
  }
  switch (m->opt.integrator) {
    case mjINT_EULER:
      mj_EulerSkip(m, d, skipstage >= mjSTAGE_POS);
      break;
    case mjINT_RK4:
      RungeKutta4(ck, m, d);
      break;
    default:
      // implicit (and implicitfast on MuJoCo 3.x). On the derivative's handle, whose finite
      // differences nudge the caller's state, a factorization MuJoCo would stop the process on
      // is refused and the state left at the step's start; ck_step does what mj_step does (the
      // check costs a second qDeriv, 0.8 of the humanoid's implicit mj_step)
      if (ck->guard_implicit && m->opt.integrator == mjINT_IMPLICIT && skipstage < mjSTAGE_VEL &&
          !ImplicitFactorable(m, d, ck->implicit_lu.data(), ck->implicit_mass.data())) {
        ck->step_refused = true;
        SetLastError(ck, "StepSkip",
                     "the implicit integrator cannot factor M - h qDeriv at t = %g (a pivot below "
                     "1e-15, where MuJoCo would stop the process); the state is left at the "
                     "step's start",
                     d->time);
        return;
      }
      mj_implicitSkip(m, d, skipstage >= mjSTAGE_VEL);
      break;
  }

  // the step is taken: the anchors of its constraint stage become the contacts' anchors, and
  // its penetrations are projected out of the positions (lcp's split impulse: no velocity)
  if (UsesAnchors(ck)) ck->anchors.Commit();
  if (ck->position_pending) {
    mj_integratePos(m, d->qpos, ck->position_fix.data(), m->opt.timestep);
    ck->position_pending = false;
  }
}

void ForwardSkip(ckHandle* ck, const mjModel* m, mjData* d, int skipstage, int skipsensor) {
  // position-dependent
  if (skipstage < mjSTAGE_POS) {
    contactkit::FwdPosition(ck, m, d);
    if (!skipsensor) mj_sensorPos(m, d);
    if (!(!skipsensor && contactkit::EnergyFromSensor(m, CK_SENS_E_POTENTIAL))) {
      if (mjENABLED(mjENBL_ENERGY)) {
        mj_energyPos(m, d);
      } else if (CK_MJ3) {
        d->energy[0] = d->energy[1] = 0;
      }
    }
  }

  // velocity-dependent
  if (skipstage < mjSTAGE_VEL) {
    mj_fwdVelocity(m, d);
    if (!skipsensor) mj_sensorVel(m, d);
    if (mjENABLED(mjENBL_ENERGY) &&
        !(!skipsensor && contactkit::EnergyFromSensor(m, CK_SENS_E_KINETIC))) {
      mj_energyVel(m, d);
    }
  }

  // acceleration-dependent, with our constraint stage
  if (mjcb_control && !(CK_MJ3 && mjDISABLED(mjDSBL_ACTUATION))) mjcb_control(m, d);
  mj_fwdActuation(m, d);
  mj_fwdAcceleration(m, d);
  contactkit::ConstraintStage(ck, m, d);
  if (!skipsensor) contactkit::SensorAcc(m, d);
}

// the checks of a pipeline entry point fn: the handle free, the model its own, data given (the
// reason goes to ck_lastError); clears the last error when the call may go ahead
bool EntryOk(const InUse& guard, ckHandle* ck, const mjModel* m, const mjData* d, const char* fn) {
  if (!guard.ok() || !CheckEntry(ck, m, d, fn, true)) return false;
  ck->error[0] = 0;
  return true;
}

}  // namespace contactkit

extern "C" {

void ck_forwardSkip(ckHandle* ck, const mjModel* m, mjData* d, int skipstage, int skipsensor) {
  contactkit::InUse guard(ck, "ck_forward");
  if (!contactkit::EntryOk(guard, ck, m, d, "ck_forward")) return;
  contactkit::ForwardSkip(ck, m, d, skipstage, skipsensor);
}

void ck_forward(ckHandle* ck, const mjModel* m, mjData* d) {
  ck_forwardSkip(ck, m, d, mjSTAGE_NONE, 0);
}

void ck_step(ckHandle* ck, const mjModel* m, mjData* d) {
  contactkit::InUse guard(ck, "ck_step");
  if (!contactkit::EntryOk(guard, ck, m, d, "ck_step")) return;
  contactkit::StepSkip(ck, m, d, mjSTAGE_NONE, 0);
}

}  // extern "C"
