// Copyright 2026 The contactkit developers.
#include "tools/common/robot_suite.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <random>

#include "tools/common/divergence.h"

namespace contactkit::tools {
namespace {

bool Exists(const std::string& path) { return access(path.c_str(), R_OK) == 0; }

// differences below this Frobenius norm are finite-difference noise (eps 1e-6 on states of order
// 1): a B whose true value is zero (joints held by dry friction) is not compared relatively
constexpr double kFdNoise = 1e-6;

// error of the analytic J (rows x cols, row-major) against differences: per column (one input
// direction) the nearest of the centered ones C, the forward ones F and the backward ones 2C - F,
// since at a kink (a contact closed exactly to lcp's slop, a force at a bound) the step is only
// piecewise smooth and its analytic derivative is one of the one-sided ones; relative to
// max(||C||_F, kFdNoise). onesided counts the columns only a one-sided difference matched (10x
// closer than the centered one)
double JacobianError(const std::vector<mjtNum>& J, const std::vector<mjtNum>& C,
                     const std::vector<mjtNum>& F, int rows, int cols, int* onesided) {
  double num = 0, den = 0;
  for (int j = 0; j < cols; j++) {
    double ec = 0, ef = 0, eb = 0;
    for (int i = 0; i < rows; i++) {
      const size_t k = static_cast<size_t>(i) * cols + j;
      const double b = 2 * C[k] - F[k];
      ec += (J[k] - C[k]) * (J[k] - C[k]);
      ef += (J[k] - F[k]) * (J[k] - F[k]);
      eb += (J[k] - b) * (J[k] - b);
      den += C[k] * C[k];
    }
    const double e = std::min({ec, ef, eb});
    if (ec > 100 * e && ec > kFdNoise * kFdNoise) ++*onesided;
    num += e;
  }
  return std::sqrt(num) / std::max(std::sqrt(den), kFdNoise);
}

// initial state of a case: keyframe 0 (or the default pose); a drop raises every free body by
// kSuiteDropHeight from there
void Reset(const mjModel* m, mjData* d, SuiteStart start) {
  if (m->nkey > 0) {
    mj_resetDataKeyframe(m, d, 0);
  } else {
    mj_resetData(m, d);
  }
  if (start == kStartDrop) {
    for (int j = 0; j < m->njnt; j++) {
      if (m->jnt_type[j] == mjJNT_FREE) d->qpos[m->jnt_qposadr[j] + 2] += kSuiteDropHeight;
    }
  }
}

// held: the keyframe's controls (zero without one, and for a hovering model's drop: motors off);
// random: uniform in each control's range ([-1, 1] if unlimited), drawn anew every 20 ms of
// simulated time
class Controls {
 public:
  Controls(const mjModel* m, const SuiteModel& model, SuiteStart start, SuiteControl control)
      : m_(m), control_(control), held_(m->nu, 0.0), rng_(12345) {
    if (m->nkey > 0 && !(model.hovers && start == kStartDrop)) {
      held_.assign(m->key_ctrl, m->key_ctrl + m->nu);
    }
  }
  void Apply(mjData* d) {
    if (control_ == kControlHeld) {
      std::copy(held_.begin(), held_.end(), d->ctrl);
      return;
    }
    if (d->time < next_ - 1e-12) return;
    next_ = d->time + 0.02;
    for (int i = 0; i < m_->nu; i++) {
      const bool limited = m_->actuator_ctrllimited[i];
      const double lo = limited ? m_->actuator_ctrlrange[2 * i] : -1;
      const double hi = limited ? m_->actuator_ctrlrange[2 * i + 1] : 1;
      d->ctrl[i] = std::uniform_real_distribution<double>(lo, hi)(rng_);
    }
  }

 private:
  const mjModel* m_;
  SuiteControl control_;
  std::vector<double> held_;
  std::mt19937 rng_;
  double next_ = -1;
};

}  // namespace

bool HasFreeBody(const mjModel* m) {
  for (int j = 0; j < m->njnt; j++) {
    if (m->jnt_type[j] == mjJNT_FREE) return true;
  }
  return false;
}

// MuJoCo's solver to (near) exact convergence, as tests/plugin/deriv/deriv_util.h's Tighten:
// from 3.11 Newton stops on its decrement, which with elliptic cones needs tolerance 0 to see 1e-9
// gradients
void TightenMujoco(mjModel* m) {
  const bool decrement = mjVERSION_HEADER >= 3011000 && m->opt.cone == mjCONE_ELLIPTIC;
  m->opt.tolerance = decrement ? 0 : 1e-14;
  m->opt.iterations = 200;
}

namespace {

// largest |qvel|
double MaxQvel(const mjModel* m, const mjData* d) {
  double v = 0;
  for (int i = 0; i < m->nv; i++) v = std::max(v, std::fabs(d->qvel[i]));
  return v;
}

}  // namespace

namespace {

// every model of the suite at its path for this MuJoCo version
std::vector<SuiteModel> AllModels(const std::string& menagerie_dir,
                                  const std::string& examples_dir) {
  const bool mj3 = mjVERSION_HEADER >= 300;
  const std::string v = mj3 ? "" : "_mj222";
  return {
      {"panda", "Franka Panda", menagerie_dir + "/franka_emika_panda/scene" + v + ".xml", false,
       true},
      {"a1", "Unitree A1", menagerie_dir + "/unitree_a1/scene_mj222.xml", false, true},
      {"allegro", "Wonik Allegro", menagerie_dir + "/wonik_allegro/scene_right.xml", false, true},
      {"leap", "LEAP hand", menagerie_dir + "/leap_hand/scene_right" + v + ".xml", false, true},
      {"shadow", "Shadow hand", menagerie_dir + "/shadow_hand/scene_right.xml", false, true},
      {"x2", "Skydio X2", menagerie_dir + "/skydio_x2/scene" + v + ".xml", true, true},
      {"humanoid", "Humanoid", examples_dir + "/humanoid/humanoid.xml", false, false},
      {"mug", "Mug", examples_dir + "/mug/mug.xml", false, true},
      {"slider_crank", "Slider crank", examples_dir + "/slider_crank/slider_crank.xml", false,
       false},
      {"arm26", "Tendon arm", examples_dir + "/tendon_arm/arm26.xml", false, false},
  };
}

}  // namespace

std::vector<std::string> SuiteModelKeys() {
  std::vector<std::string> keys;
  for (const SuiteModel& s : AllModels("", "")) keys.push_back(s.key);
  return keys;
}

std::vector<SuiteModel> SuiteModels(const std::string& menagerie_dir,
                                    const std::string& examples_dir,
                                    std::vector<std::string>* absent) {
  std::vector<SuiteModel> out;
  for (const SuiteModel& s : AllModels(menagerie_dir, examples_dir)) {
    if (Exists(s.path)) {
      out.push_back(s);
    } else if (absent) {
      absent->push_back(s.path);
    }
  }
  return out;
}

double SuitePenetrationBound(int solver, double h) {
  // soft contact (mujoco) settles 10-25 mm deep on the A1; comfree's stiffness k = 0.1 more
  const double base = solver == ckSOL_MUJOCO ? 0.025 : solver == ckSOL_COMFREE ? 0.05 : 0.01;
  return base + 4 * h;
}

double SuiteJacobianBound(int solver) {
  // where the step is smooth every solver's Jacobian meets centered differences to 1e-5 or
  // better (tests/plugin/deriv/actuator_limit_test.cc); 1e-4 leaves room for solver tolerances
  (void)solver;
  return 1e-4;
}

std::string SuiteFailure(const SuiteResult& r) {
  if (!r.error.empty()) return "error: " + r.error;
  if (r.diverged) return "diverged: " + r.why;
  std::string out;
  if (r.penetration_bound >= 0 && r.max_penetration > r.penetration_bound) {
    out += "penetration " + std::to_string(1e3 * r.max_penetration) + " mm";
  }
  if (r.rest_drift > kSuiteRestDrift) {
    out += std::string(out.empty() ? "" : "; ") + "rest drift " +
           std::to_string(1e3 * r.rest_drift) + " mm";
  }
  return out;
}

const char* SuiteStartName(SuiteStart s) { return s == kStartKeyframe ? "keyframe" : "drop"; }
const char* SuiteControlName(SuiteControl c) { return c == kControlHeld ? "held" : "random"; }

SuiteResult RunSuiteCase(mjModel* m, const SuiteModel& model, const SuiteCase& c) {
  SuiteResult r;
  const double h0 = m->opt.timestep;
  m->opt.timestep = h0 * c.timestep_scale;
  const int nstep = std::max(1, static_cast<int>(std::lround(c.duration / m->opt.timestep)));
  const int rest_from = nstep - static_cast<int>(std::lround(c.rest_window / m->opt.timestep));
  const bool rest =
      model.rests && c.control == kControlHeld && !(model.hovers && c.start == kStartKeyframe);
  if (c.control == kControlHeld)
    r.penetration_bound = SuitePenetrationBound(c.solver, m->opt.timestep);
  if (c.start == kStartDrop && !HasFreeBody(m)) {
    r.error = "no free body to drop";
    m->opt.timestep = h0;
    return r;
  }

  ckSettings s;
  ck_defaultSettings(&s);
  s.solver = c.solver;
  s.deriv.enabled = 0;
  char err[1000] = "";
  ckHandle* ck = ck_make(m, &s, err, sizeof(err));
  if (!ck) {
    r.error = err;
    m->opt.timestep = h0;
    return r;
  }
  mjData* d = mj_makeData(m);
  std::vector<mjtNum> xpos0(3 * m->nbody);

  // one run of nstep steps with ck_step or mj_step; returns the mean wall time per step
  auto run = [&](bool ours) {
    Reset(m, d, c.start);
    Controls controls(m, model, c.start, c.control);
    // penetration has its own bound per solver (SuiteFailure)
    DivergenceCheck diverged({kSuiteMaxQvel, HUGE_VAL});
    diverged.Start(d);
    double time = 0;
    for (int t = 0; t < nstep; t++) {
      controls.Apply(d);
      const auto t0 = std::chrono::steady_clock::now();
      if (ours) {
        ck_step(ck, m, d);
      } else {
        mj_step(m, d);
      }
      time += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (!ours) continue;
      r.steps = t + 1;
      const ckStats* st = ck_stats(ck);
      r.max_penetration = std::max(r.max_penetration, static_cast<double>(st->max_penetration));
      r.inexact += st->status != ckSTATUS_SOLVED;
      r.max_qvel = std::max(r.max_qvel, MaxQvel(m, d));
      if (diverged.Check(m, d, t)) {
        r.why = diverged.reason();
        r.diverged = true;
        break;
      }
      // drift: how far any body moves once it should have come to rest
      if (rest && t == rest_from) std::copy(d->xpos, d->xpos + 3 * m->nbody, xpos0.begin());
      if (rest && t > rest_from) {
        r.rest_drift = std::max(r.rest_drift, 0.0);
        for (int b = 0; b < m->nbody; b++) {
          r.rest_drift = std::max(r.rest_drift, mju_dist3(d->xpos + 3 * b, xpos0.data() + 3 * b));
        }
      }
    }
    return time / nstep;
  };
  r.step_time = run(true);
  if (c.time_mujoco && !r.diverged) r.mujoco_step_time = run(false);

  mj_deleteData(d);
  ck_free(ck);
  m->opt.timestep = h0;
  return r;
}

SuiteJacobian CheckSuiteJacobian(mjModel* m, int solver, int timestep_scale, double settle) {
  SuiteJacobian out;
  const mjOption saved = m->opt;
  m->opt.timestep *= timestep_scale;
  if (solver == ckSOL_MUJOCO) TightenMujoco(m);

  ckSettings s;
  ck_defaultSettings(&s);
  s.solver = solver;
  s.ipm.kappa_grad = s.ipm.kappa_tol;
  char err[1000] = "";
  ckHandle* ck = ck_make(m, &s, err, sizeof(err));
  if (!ck) {
    out.error = err;
    m->opt = saved;
    return out;
  }
  mjData* d = mj_makeData(m);
  Reset(m, d, kStartKeyframe);
  Controls controls(m, SuiteModel{}, kStartKeyframe, kControlHeld);
  const int nsettle = static_cast<int>(std::lround(settle / m->opt.timestep));
  for (int t = 0; t < nsettle; t++) {
    controls.Apply(d);
    ck_step(ck, m, d);
  }
  controls.Apply(d);
  out.ncon = d->ncon;

  const int nx = 2 * m->nv + m->na, nu = m->nu;
  std::vector<mjtNum> A(nx * nx), B(nx * std::max(nu, 1)), Afd(A.size()), Bfd(B.size()),
      Afw(A.size()), Bfw(B.size());
  out.method = ck_transitionJac(ck, m, d, A.data(), nu ? B.data() : nullptr, nullptr, nullptr);
  const int fd =
      ck_transitionFD(ck, m, d, 1e-6, 1, Afd.data(), nu ? Bfd.data() : nullptr, nullptr, nullptr);
  const int fw =
      ck_transitionFD(ck, m, d, 1e-6, 0, Afw.data(), nu ? Bfw.data() : nullptr, nullptr, nullptr);
  if (out.method < 0 || fd != 0 || fw != 0) {
    out.error = ck_lastError(ck);
  } else {
    out.error_A = JacobianError(A, Afd, Afw, nx, nx, &out.onesided);
    out.error_B = nu ? JacobianError(B, Bfd, Bfw, nx, nu, &out.onesided) : 0;
  }
  mj_deleteData(d);
  ck_free(ck);
  m->opt = saved;
  return out;
}

}  // namespace contactkit::tools
