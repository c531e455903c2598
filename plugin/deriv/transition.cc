// Copyright 2026 The contactkit developers.
//
// The transition entry points: set-up of the parts, ck_transitionJac / VJP / FD, the output
// columns, the complementarity-aware VJP, and the C API.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <initializer_list>
#include <new>
#include <utility>

#include "plugin/deriv/derivative.h"
#include "plugin/step/compat.h"
#include "plugin/step/handle.h"
#include "solvers/common/dense.h"

namespace contactkit {
namespace {

constexpr double kNudge = 1e-6;  // step of the finite-difference fallback

}  // namespace

//---------------------------------- workspace -----------------------------------------------------

Derivative::~Derivative() {
  if (pass_data_) mj_deleteData(pass_data_);
  if (param_model_) mj_deleteModel(param_model_);
  if (stage_data_) mj_deleteData(stage_data_);
  ck_free(shadow_);
}

bool Derivative::Setup(const mjModel* m, const ckSettings& s, std::string* error) {
  nq_ = m->nq;
  nv_ = m->nv;
  na_ = m->na;
  nu_ = m->nu;
  nM_ = m->nM;
  ns_ = m->nsensordata;
  settings_ = s;
  SizeAdaptive(s);
  ckSettings inner = s;
  inner.deriv.enabled = 0;
  shadow_ = MakeHandle(m, inner, error);
  if (!shadow_) return false;
  shadow_->extractor.set_structural(true);
  // the differences step states the caller never stepped: refuse what MuJoCo's implicit
  // integrator could not factor (ImplicitFactorable's scratch)
  shadow_->guard_implicit = true;
  shadow_->implicit_lu.assign(m->nD, 0);
  shadow_->implicit_mass.assign(m->nM, 0);
  stage_data_ = mj_makeData(m);
  pass_data_ = mj_makeData(m);
  if (!stage_data_ || !pass_data_) {
    *error = "could not allocate the derivative's scratch mjData";
    return false;
  }
  if (!extractor_.Setup(m, 0, error)) return false;
  extractor_.set_structural(true);
  if (!smooth_.MakeCfdModel(m, s, error)) return false;
  const ProblemDims& dims = extractor_.dims();
  storage_.Allocate(dims, m->dof_parentid, m->dof_Madr, extractor_.dof_tree().data(),
                    extractor_.ntree());
  soft_.Setup(dims);

  // sizes, then every part's arrays from one block
  DerivSizes n;
  n.nq = nq_;
  n.nv = nv_;
  n.na = na_;
  n.nu = nu_;
  n.nM = nM_;
  n.ns = ns_;
  n.nbody = m->nbody;
  n.njnt = m->njnt;
  n.neq = m->neq;
  n.rows = std::max(dims.max_rows, 1);
  n.nnz = std::max(dims.max_nnz, 1);
  n.ncon = std::max(dims.max_contacts, 1);
  n.nefc = n.rows + 4 * n.ncon;
  n.ntree = extractor_.ntree();
  const int* dof_tree = extractor_.dof_tree().data();
  n.ntreeblock = TreeBlocks::Size(dof_tree, n.nv, n.ntree);
  arena_.Allocate([&](ArenaCarver& c) {
    nominal_.Carve(c, n);
    tan_.Carve(c, n);
    trees_.Carve(c, n);
    integrator_.Carve(c, n, m);
    block_.Carve(c, n);
    fd_.Carve(c, n);
    out_.Carve(c, n);
    elastic_.Carve(c, n);
    scratch_.Carve(c, n);
    smooth_.Carve(c, n);
  });

  // what does not change with the state
  trees_.Fill(dof_tree, n.nv, n.ntree);
  smooth_.Setup(m, n, stage_data_, pass_data_, shadow_);
  integrator_.Bind(&trees_, dof_tree, n.ntree);
  for (size_t c = 0; c < n.ncon; c++) out_.contact_modes[c] = -1;
  return SetupParams(m, error);
}

bool Derivative::SetSettings(const mjModel* m, const ckSettings& s, std::string* error) {
  // contacts from distance copy the model: a new width needs it
  const bool width_changed = settings_.deriv.cfd_width != s.deriv.cfd_width;
  if (width_changed && s.deriv.cfd_width > 0 && !m) {
    *error = "changing cfd_width needs the model (m is NULL)";
    return false;
  }
  // the shadow handle only steps: it never holds a derivative workspace of its own (with
  // derivatives on it would make one, nested one level deeper on every call)
  ckSettings inner = s;
  inner.deriv.enabled = 0;
  char buf[512];
  if (ck_setSettings(shadow_, m, &inner, buf, sizeof(buf)) != 0) {
    *error = std::string("derivative workspace: ") + buf;
    return false;
  }
  if (width_changed) {
    if (!smooth_.MakeCfdModel(m, s, error)) return false;
  } else {
    smooth_.SetCfdSolimp(s);
  }
  SizeAdaptive(s);
  settings_ = s;
  return true;
}
void Derivative::Step(const mjModel* m, int skipstage, int skipsensor, double* next,
                      double* sensor) {
  ResetShadow();
  StepSkip(shadow_, m, stage_data_, skipstage, skipsensor);
  refused_ |= shadow_->step_refused;
  mju_copy(next, stage_data_->qpos, nq_);
  mju_copy(next + nq_, stage_data_->qvel, nv_);
  mju_copy(next + nq_ + nv_, stage_data_->act, na_);
  if (sensor) mju_copy(sensor, stage_data_->sensordata, ns_);
}

void Derivative::FiniteDiff(const mjModel* m, const mjData* d, mjtNum eps, int centered, mjtNum* A,
                            mjtNum* B, mjtNum* C, mjtNum* D) {
  SinkTo(A, B, C, D);
  FiniteDiffSink(m, d, eps, centered);
}

void Derivative::SinkTo(mjtNum* A, mjtNum* B, mjtNum* C, mjtNum* D) {
  sink_ = Sink();
  sink_.A = A;
  sink_.B = B;
  sink_.C = C;
  sink_.D = D;
  ZeroSink();
}

void Derivative::ZeroSink() {
  const size_t ndx = 2 * nv_ + na_, nu = nu_, ns = ns_;
  sink_check_ = 0;
  sink_direct_ = false;
  if (sink_.A) std::memset(sink_.A, 0, sizeof(mjtNum) * ndx * ndx);
  if (sink_.B) std::memset(sink_.B, 0, sizeof(mjtNum) * ndx * nu);
  if (sink_.C) std::memset(sink_.C, 0, sizeof(mjtNum) * ns * ndx);
  if (sink_.D) std::memset(sink_.D, 0, sizeof(mjtNum) * ns * nu);
}

void Derivative::FiniteDiffSink(const mjModel* m, const mjData* d, double eps, int centered) {
  const bool sensors = sink_.C || sink_.D || (sink_.ds && (sink_.gx || sink_.gu));
  fd_.Run(m, d, stage_data_, eps, centered, sink_.WantsState(), sink_.WantsCtrl(), sensors, this);
}

void Derivative::EmitState(int col, const double* out) {
  if (elastic_.n()) elastic_.Column(col, out);
  EmitColumn(col, out, 2 * nv_ + na_, sink_.A, sink_.B, sink_.dx);
}

void Derivative::EmitStateSpan(int col, const double* out, int lo, int hi) {
  const int nv = nv_, ndx = 2 * nv_ + na_, nu = nu_;
  mjtNum* X = col < ndx ? sink_.A : sink_.B;
  if (!X) return;
  const size_t stride = col < ndx ? ndx : nu;
  const size_t c = col < ndx ? col : col - ndx;
  // (as EmitColumn's values, x * 0 summed, NaN if a value is not finite; every entry of the span
  // stored, + 0 turning -0 into the +0 already there: no branch per entry; the sums four apart)
  double check[4] = {0, 0, 0, 0};
  auto rows = [&](int i0, int i1) {
    mjtNum* x = X + static_cast<size_t>(i0) * stride + c;
    int i = i0;
    for (; i + 4 <= i1; i += 4, x += 4 * stride) {
      // (read before the stores: out and X do not overlap)
      const double v0 = out[i] + 0.0, v1 = out[i + 1] + 0.0, v2 = out[i + 2] + 0.0,
                   v3 = out[i + 3] + 0.0;
      x[0] = v0;
      x[stride] = v1;
      x[2 * stride] = v2;
      x[3 * stride] = v3;
      check[0] += v0 * 0;
      check[1] += v1 * 0;
      check[2] += v2 * 0;
      check[3] += v3 * 0;
    }
    for (; i < i1; i++, x += stride) {
      *x = out[i] + 0.0;
      check[0] += out[i] * 0;
    }
  };
  rows(lo, hi);
  rows(nv + lo, nv + hi);
  rows(2 * nv, ndx);
  sink_check_ += (check[0] + check[1]) + (check[2] + check[3]);
}

void Derivative::EmitSensor(int col, const double* ds) {
  EmitColumn(col, ds, ns_, sink_.C, sink_.D, sink_.ds);
}

void Derivative::EmitColumn(int col, const double* x, int n, mjtNum* X, mjtNum* U,
                            const mjtNum* adjoint) {
  const int ndx = 2 * nv_ + na_, nu = nu_;
  // X and U start zeroed (ZeroSink): only the column's nonzeros are written (a direction reaches
  // its island's dofs, and the strided writes of a column are what cost)
  // (x * 0 summed: NaN if a written value is not finite, SinkFinite)
  double check = 0;
  if (col < ndx) {
    if (X) {
      for (int i = 0; i < n; i++) {
        if (x[i] != 0) X[static_cast<size_t>(i) * ndx + col] = x[i], check += x[i] * 0;
      }
    }
    if (sink_.gx && adjoint) sink_.gx[col] += mju_dot(x, adjoint, n);
  } else {
    if (U) {
      for (int i = 0; i < n; i++) {
        if (x[i] != 0) U[static_cast<size_t>(i) * nu + (col - ndx)] = x[i], check += x[i] * 0;
      }
    }
    if (sink_.gu && adjoint) sink_.gu[col - ndx] += mju_dot(x, adjoint, n);
  }
  sink_check_ += check;
}
int Derivative::Run(const mjModel* m, const mjData* d) {
  fallback_ = ckFALLBACK_NONE;
  nfd_ = 0;
  bool ok = true;
  if (m->opt.noslip_iterations > 0) {
    fallback_ = ckFALLBACK_NOSLIP;
    ok = false;
  }
  // the implicit integrators' M - h qDeriv holds fluid drag, whose change with q and v the
  // tangents leave out (Skydio X2 under implicit: A 1.3e-3 off)
  if (ok && IsImplicit(m) && (m->opt.density > 0 || m->opt.viscosity > 0)) {
    fallback_ = ckFALLBACK_FLUID_IMPLICIT;
    ok = false;
  }
  if (ok && JdotvInReference(m, d)) {
    fallback_ = ckFALLBACK_JDOTV;
    ok = false;
  }
  if (ok && settings_.integrator != ckINT_MODEL) {
    ok = Adaptive(m, d);
    if (!ok && fallback_ == ckFALLBACK_NONE) fallback_ = ckFALLBACK_ADAPTIVE;
    return ok ? 0 : 1;
  }
  if (ok) {
    CopyStepInputs(m, d, stage_data_);
    ok = m->opt.integrator == mjINT_RK4 ? RungeKutta(m) : SingleStage(m);
  }
  return ok ? 0 : 1;
}

int Derivative::DeferredColumns(const mjModel* m, const mjData* d) {
  // the columns of directions without a force tangent, by the fallback's differences (the
  // others' columns are written: EmitColumn adds nothing to them); the shadow's steps replace
  // the stage's problem. 1 if there were any (the caller is told, as for a full fallback)
  if (!nfd_) return 0;
  fallback_ = ckFALLBACK_NO_TANGENT;
  const bool sensors = sink_.C || sink_.D || (sink_.ds && (sink_.gx || sink_.gu));
  fd_.Run(m, d, stage_data_, kNudge, 0, sink_.WantsState(), sink_.WantsCtrl(), sensors, this,
          out_.fd_col);
  return 1;
}

int Derivative::Jacobian(const mjModel* m, const mjData* d, mjtNum* A, mjtNum* B, mjtNum* C,
                         mjtNum* D) {
  if (!A && !B && !C && !D) return 0;
  SinkTo(A, B, C, D);
  if (Run(m, d) == 0) return DeferredColumns(m, d);
  nfd_ = 0;  // (every column by differences)
  FiniteDiff(m, d, kNudge, 0, A, B, C, D);
  return 1;
}

int Derivative::Vjp(const mjModel* m, const mjData* d, const mjtNum* dx, const mjtNum* ds,
                    mjtNum* gx, mjtNum* gu) {
  const int ndx = 2 * nv_ + na_;
  if (gx) mju_zero(gx, ndx);
  if (gu) mju_zero(gu, nu_);
  if ((!gx && !gu) || (!dx && !ds)) return 0;
  sink_ = Sink();
  sink_.dx = dx;
  sink_.ds = ds;
  sink_.gx = gx;
  sink_.gu = gu;
  if (Run(m, d) != 0) {
    // fallback: forward differences, one column at a time through the same sink
    if (gx) mju_zero(gx, ndx);
    if (gu) mju_zero(gu, nu_);
    nfd_ = 0;  // (every column by differences)
    FiniteDiffSink(m, d, kNudge, 0);
    return 1;
  }
  const int ret = DeferredColumns(m, d);  // (none when the complementarity-aware pass may run)
  complementarity_applied_ = false;
  if (settings_.deriv.complementarity_aware && dx && m->opt.integrator != mjINT_RK4 &&
      settings_.integrator == ckINT_MODEL) {
    ComplementarityAware(m, d);
  }
  return ret;
}

bool Derivative::AwareModes(const mjModel* m) {
  // Nimble section IV-D: reclassify each contact by the sign of the loss's sensitivity to its
  // separation, g_c = J_c M^-1 dL/dv+ (g < 0: the loss wants the contact to open)
  // (the mujoco solver: its soft tangent takes the modes at the re-run's Prepare)
  keep_modes_ = false;
  if (!stage_.has_rows) return false;
  const Problem& p = *stage_.problem;
  const int nv = nv_;
  const double h = m->opt.timestep;

  // dL/dv+ from the next state's adjoint: dv+ enters the velocities directly and the positions
  // through the position update (transpose of IntegrateTangent's velocity part)
  double* lam = scratch_.b;
  mju_copy(lam, sink_.dx + nv, nv);
  for (int j = 0; j < m->njnt; j++) {
    int v = m->jnt_dofadr[j];
    const int type = m->jnt_type[j];
    if (type == mjJNT_FREE) {
      for (int i = 0; i < 3; i++) lam[v + i] += h * sink_.dx[v + i];
      v += 3;
    }
    if (type == mjJNT_FREE || type == mjJNT_BALL) {
      const double* Jr = integrator_.step_maps + 18 * j + 9;
      for (int i = 0; i < 3; i++) {
        for (int r = 0; r < 3; r++) lam[v + i] += h * Jr[3 * r + i] * sink_.dx[v + r];
      }
    } else {
      lam[v] += h * sink_.dx[v];
    }
  }
  p.mass.Solve(lam);
  for (int c = 0; c < p.ncon; c++) out_.contact_modes[c] = p.J.Dot(p.con[c].row, lam) < 0 ? 0 : 1;
  if (!stage_.solver) return true;  // keep_modes_: the aware run's Prepare
  if (!stage_.solver->SetTangentModes(p, out_.contact_modes)) return false;
  keep_modes_ = stage_.solver->KeepTangentModes();
  return true;
}

double Derivative::AwareScore(const mjModel* m) const {
  // Nimble's choice between two classifications: the larger |dL/dq|^2 + |dL/du|^2 / h
  const double h = m->opt.timestep;
  double s = 0;
  for (int i = 0; i < nv_ && sink_.gx; i++) s += sink_.gx[i] * sink_.gx[i];
  for (int i = 0; i < nu_ && sink_.gu; i++) s += sink_.gu[i] * sink_.gu[i] / h;
  return s;
}

void Derivative::ComplementarityAware(const mjModel* m, const mjData* d) {
  // the gradient with the adjoint's classification, kept if its score is larger
  if (!AwareModes(m)) {
    if (stage_.solver) stage_.solver->SetTangentModes(*stage_.problem, nullptr);
    return;
  }
  complementarity_applied_ = true;
  const int ndx = 2 * nv_ + na_;
  double* first = out_.first_gradient;
  if (sink_.gx) mju_copy(first, sink_.gx, ndx);
  if (sink_.gu) mju_copy(first + ndx, sink_.gu, nu_);
  const double s1 = AwareScore(m);
  if (sink_.gx) mju_zero(sink_.gx, ndx);
  if (sink_.gu) mju_zero(sink_.gu, nu_);
  apply_modes_ = true;
  const int ok = Run(m, d);
  apply_modes_ = false;
  if (stage_.solver) stage_.solver->SetTangentModes(*stage_.problem, nullptr);
  if (ok != 0 || (s1 >= AwareScore(m) && !keep_modes_)) {
    if (sink_.gx) mju_copy(sink_.gx, first, ndx);
    if (sink_.gu) mju_copy(sink_.gu, first + ndx, nu_);
  }
}

int Derivative::JacobianAware(const mjModel* m, const mjData* d, const mjtNum* dx, mjtNum* A,
                              mjtNum* B, mjtNum* C, mjtNum* D) {
  complementarity_applied_ = false;
  // RK4 and the adaptive pairs chain stages: no reclassification there
  if (!dx || m->opt.integrator == mjINT_RK4 || settings_.integrator != ckINT_MODEL) {
    return Jacobian(m, d, A, B, C, D);
  }
  if (!A && !B && !C && !D) return 0;
  // the solve's own classification, its Jacobians and their product with dx (score s1)
  const int ndx = 2 * nv_ + na_;
  double* g = out_.first_gradient;
  mju_zero(g, ndx + nu_);
  // each run writes only its columns' nonzeros into zeroed outputs
  SinkTo(A, B, C, D);
  sink_.dx = dx;
  sink_.gx = g;
  sink_.gu = g + ndx;
  // (columns left to differences: the whole Jacobian by them, the reclassification below reads
  // the stage's problem)
  if (Run(m, d) != 0 || nfd_) {
    if (nfd_) fallback_ = ckFALLBACK_NO_TANGENT;
    nfd_ = 0;  // (every column by differences)
    FiniteDiff(m, d, kNudge, 0, A, B, C, D);
    return 1;
  }
  if (!AwareModes(m)) {
    // no contact, or a solver that cannot reclassify (lcp: restore its own classification)
    if (stage_.solver) stage_.solver->SetTangentModes(*stage_.problem, nullptr);
    return 0;
  }
  const double s1 = AwareScore(m);

  // the adjoint's classification (score s2): kept where the VJP would keep it
  mju_zero(g, ndx + nu_);
  ZeroSink();
  apply_modes_ = true;
  const int ok = Run(m, d);
  apply_modes_ = false;
  if (stage_.solver) stage_.solver->SetTangentModes(*stage_.problem, nullptr);
  if (ok == 0 && !nfd_ && (s1 < AwareScore(m) || keep_modes_)) {
    complementarity_applied_ = true;
    return 0;
  }
  // the first was larger: its Jacobians again
  sink_.dx = nullptr;
  sink_.gx = sink_.gu = nullptr;
  ZeroSink();
  return Run(m, d) == 0 && !nfd_ ? 0 : Jacobian(m, d, A, B, C, D);
}

}  // namespace contactkit

//---------------------------------- C API ---------------------------------------------------------

namespace contactkit {

// the first of n values that MuJoCo's checks would call bad (NaN, inf, or beyond mjMAXVAL), or -1
int FirstBad(const mjtNum* x, int n) {
  for (int i = 0; i < n; i++) {
    if (!(std::fabs(x[i]) <= mjMAXVAL)) return i;
  }
  return -1;
}

// the checks of every derivative entry point: 0, or -1 (bad arguments, another model, no
// derivative workspace) or -2 (a state MuJoCo would reset) with ck_lastError saying why.
// A state MuJoCo would reset is refused here, and StepSkip never reuses stages a reset cleared,
// so no path hands MuJoCo a state on which it reaches mju_error. We chose this over catching
// mju_error with a temporary handler and longjmp: mju_user_error is one process-wide pointer
// (not per thread, and the caller's own handler), and a longjmp across our C++ frames would skip
// their destructors, which is undefined behaviour.
int CheckTransition(ckHandle* ck, const mjModel* m, const mjData* d, const char* fn) {
  if (!CheckEntry(ck, m, d, fn, false)) return -1;
  if (!ck->settings.deriv.enabled) {
    SetLastError(ck, fn,
                 "the handle has no derivative workspace (setting 'derivatives' is 0; turn it on "
                 "with ck_setSettings)");
    return -1;
  }
  std::string err;
  if (!EnsureDerivative(ck, m, &err)) {
    SetLastError(ck, fn, "could not make the derivative workspace: %s", err.c_str());
    return -1;
  }
  const struct {
    const char* name;
    const mjtNum* x;
    int n;
  } state[] = {{"qpos", d->qpos, static_cast<int>(m->nq)},
               {"qvel", d->qvel, static_cast<int>(m->nv)},
               {"act", d->act, static_cast<int>(m->na)},
               {"ctrl", d->ctrl, static_cast<int>(m->nu)},
               {"qacc_warmstart", d->qacc_warmstart, static_cast<int>(m->nv)},
               {"qfrc_applied", d->qfrc_applied, static_cast<int>(m->nv)},
               {"xfrc_applied", d->xfrc_applied, 6 * static_cast<int>(m->nbody)},
               {"mocap_pos", d->mocap_pos, 3 * static_cast<int>(m->nmocap)},
               {"mocap_quat", d->mocap_quat, 4 * static_cast<int>(m->nmocap)}};
  for (const auto& s : state) {
    const int i = FirstBad(s.x, s.n);
    if (i >= 0) {
      SetLastError(ck, fn,
                   "d->%s[%d] = %g is not finite or beyond 1e10; MuJoCo would reset such a "
                   "state, which has no Jacobian",
                   s.name, i, static_cast<double>(s.x[i]));
      return -2;
    }
  }
  ck->deriv->clear_refused();
  ck->error[0] = 0;
  return 0;
}

namespace {

// every x[i] finite: x * 0 is 0 for finite x and NaN otherwise (four sums, vectorized)
bool AllFinite(const mjtNum* x, size_t n) {
  double s[4] = {0, 0, 0, 0};
  size_t i = 0;
  for (; i + 4 <= n; i += 4) {
    for (int k = 0; k < 4; k++) s[k] += x[i + k] * 0;
  }
  for (; i < n; i++) s[0] += x[i] * 0;
  return s[0] + s[1] + s[2] + s[3] == 0;
}

// the result of an evaluation: -2 if MuJoCo reset a scratch mjData in it (the state leaves
// MuJoCo's range within the step) or an output is not finite; otherwise ret (1: ck_lastError
// says why finite differences were used)
int Finish(ckHandle* ck, const char* fn, int ret, int resets,
           std::initializer_list<std::pair<const mjtNum*, size_t>> outputs, bool sink = false) {
  if (ck->deriv->ScratchResets() != resets) {
    SetLastError(ck, fn,
                 "MuJoCo reset the state within the step (NaN, inf or beyond 1e10); no Jacobian");
    return -2;
  }
  if (ck->deriv->refused()) {
    SetLastError(ck, fn,
                 "the implicit integrator cannot factor M - h qDeriv at a state the differences "
                 "nudge (a pivot below 1e-15, where MuJoCo would stop the process); no Jacobian");
    return -2;
  }
  // (sink: the outputs are the sink's Jacobians, whose written values it checked: this pass over
  // their ndx^2 entries was a tenth of humanoid100's Jacobian)
  const bool checked = sink && ck->deriv->SinkFinite();
  for (const auto& o : outputs) {
    if (checked || !o.first || AllFinite(o.first, o.second)) continue;
    for (size_t i = 0; i < o.second; i++) {
      if (!std::isfinite(o.first[i])) {
        SetLastError(ck, fn,
                     "the result is not finite (entry %zu); the step from this state is not", i);
        return -2;
      }
    }
  }
  if (ret == 1) {
    ck->fallback = ck->deriv->fallback();
    const int ncol = ck->deriv->fd_columns();
    if (ncol > 0) {
      SetLastError(ck, fn, "finite differences for %d columns, the others analytic: %s", ncol,
                   ck_fallbackText(ck->fallback));
    } else {
      SetLastError(ck, fn, "finite differences: %s", ck_fallbackText(ck->fallback));
    }
  }
  return ret;
}

}  // namespace
}  // namespace contactkit

extern "C" {

const char* ck_fallbackText(int reason) {
  static const char* const kText[ckNFALLBACK] = {
      "",
      "more constraint rows than the handle's capacity",
      "the Hessian of MuJoCo's solver is not positive definite",
      "M - h qDeriv is singular",
      "the solver has no analytic force tangent",
      "lcp's position correction (split impulse) is not differentiated under RK4",
      "noslip iterations are not differentiated",
      "fluid forces under the implicit integrators are not differentiated",
      "MuJoCo 3.7+ subtracts Jdot v from connect and weld rows' reference, which the analytic "
      "tangents leave out",
      "the adaptive step (tsit5, dopri5) does not complete, or takes more than 1024 internal "
      "steps",
  };
  return reason >= 0 && reason < ckNFALLBACK ? kText[reason] : nullptr;
}

int ck_transitionJac(ckHandle* ck, const mjModel* m, const mjData* d, mjtNum* A, mjtNum* B,
                     mjtNum* C, mjtNum* D) {
  using namespace contactkit;
  InUse guard(ck, "ck_transitionJac");
  if (!guard.ok()) return -1;
  ck->fallback = ckFALLBACK_NONE;
  const int check = CheckTransition(ck, m, d, "ck_transitionJac");
  if (check) return check;
  const size_t ndx = 2 * m->nv + m->na, nu = m->nu, ns = m->nsensordata;
  const int resets = ck->deriv->ScratchResets();
  const int ret = ck->deriv->Jacobian(m, d, A, B, C, D);
  return Finish(ck, "ck_transitionJac", ret, resets,
                {{A, ndx * ndx}, {B, ndx * nu}, {C, ns * ndx}, {D, ns * nu}}, true);
}

int ck_transitionJacAware(ckHandle* ck, const mjModel* m, const mjData* d, const mjtNum* dx,
                          mjtNum* A, mjtNum* B, mjtNum* C, mjtNum* D) {
  using namespace contactkit;
  InUse guard(ck, "ck_transitionJacAware");
  if (!guard.ok()) return -1;
  ck->fallback = ckFALLBACK_NONE;
  const int check = CheckTransition(ck, m, d, "ck_transitionJacAware");
  if (check) return check;
  const size_t ndx = 2 * m->nv + m->na, nu = m->nu, ns = m->nsensordata;
  if (dx) {
    const int i = FirstBad(dx, static_cast<int>(ndx));
    if (i >= 0) {
      SetLastError(ck, "ck_transitionJacAware", "dx[%d] = %g is not finite or beyond 1e10", i,
                   static_cast<double>(dx[i]));
      return -1;
    }
  }
  const int resets = ck->deriv->ScratchResets();
  const int ret = ck->deriv->JacobianAware(m, d, dx, A, B, C, D);
  return Finish(ck, "ck_transitionJacAware", ret, resets,
                {{A, ndx * ndx}, {B, ndx * nu}, {C, ns * ndx}, {D, ns * nu}}, true);
}

int ck_transitionVJP(ckHandle* ck, const mjModel* m, const mjData* d, const mjtNum* dx,
                     const mjtNum* ds, mjtNum* gx, mjtNum* gu) {
  using namespace contactkit;
  InUse guard(ck, "ck_transitionVJP");
  if (!guard.ok()) return -1;
  ck->fallback = ckFALLBACK_NONE;
  const int check = CheckTransition(ck, m, d, "ck_transitionVJP");
  if (check) return check;
  const size_t ndx = 2 * m->nv + m->na, nu = m->nu;
  const int resets = ck->deriv->ScratchResets();
  const int ret = ck->deriv->Vjp(m, d, dx, ds, gx, gu);
  return Finish(ck, "ck_transitionVJP", ret, resets, {{gx, ndx}, {gu, nu}});
}

int ck_transitionFD(ckHandle* ck, const mjModel* m, const mjData* d, mjtNum eps, int centered,
                    mjtNum* A, mjtNum* B, mjtNum* C, mjtNum* D) {
  using namespace contactkit;
  InUse guard(ck, "ck_transitionFD");
  if (!guard.ok()) return -1;
  const int check = CheckTransition(ck, m, d, "ck_transitionFD");
  if (check) return check;
  if (!(eps > 0) || !std::isfinite(eps)) {
    SetLastError(ck, "ck_transitionFD", "eps = %g; allowed: a finite number > 0",
                 static_cast<double>(eps));
    return -1;
  }
  const size_t ndx = 2 * m->nv + m->na, nu = m->nu, ns = m->nsensordata;
  const int resets = ck->deriv->ScratchResets();
  ck->deriv->FiniteDiff(m, d, eps, centered, A, B, C, D);
  return Finish(ck, "ck_transitionFD", 0, resets,
                {{A, ndx * ndx}, {B, ndx * nu}, {C, ns * ndx}, {D, ns * nu}}, true);
}

}  // extern "C"
