// Copyright 2026 The contactkit developers.
#include "tools/bench_suite/diffmjx_toss.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "contactkit/contactkit.h"
#include "tools/bench_suite/plot.h"
#include "tools/common/tool_util.h"

namespace contactkit::bench {
namespace {

using tools::Fmt;

// a 10 cm cube, tilted, 0.3 m above the floor; DiffMJX's contact settings on both geoms. refsafe
// off: MuJoCo would otherwise raise solref's time constant to twice the timestep, a contact that
// depends on the step (0.02 s under the adaptive pairs' 0.01 s outer step) instead of one
// continuous-time system for every integrator
// a body with geom (10 cm across) over the floor, both with DiffMJX's contact
std::string TossXml(const std::string& geom) {
  return R"(
<mujoco>
  <option><flag refsafe="disable"/></option>
  <worldbody>
    <geom type="plane" size="10 10 0.1" solref="0.005 1" solimp="0 0.95 0.001 0.5 2"/>
    <body pos="0 0 0.3" euler="20 30 0">
      <freejoint/>
      )" +
         geom + R"( mass="1" solref="0.005 1" solimp="0 0.95 0.001 0.5 2"/>
    </body>
  </worldbody>
</mujoco>)";
}

// the primitives of Fig. 3 / Fig. 21, the cube first
const std::pair<const char*, const char*> kPrimitives[] = {
    {"box", R"(<geom type="box" size="0.05 0.05 0.05")"},
    {"sphere", R"(<geom type="sphere" size="0.05")"},
    {"capsule", R"(<geom type="capsule" size="0.03 0.04")"},
    {"cylinder", R"(<geom type="cylinder" size="0.05 0.05")"},
};

constexpr double kVx = -2.0;       // initial velocity along x (the paper's toss)
constexpr double kRefTol = 1e-12;  // the reference's tolerance (the paper's)
constexpr double kRefEps = 1e-5;   // the reference gradient's central differences

// an integrator of the comparison
struct Method {
  std::string family;  // euler, rk4, tsit5, dopri5
  int integrator;      // ckIntegrator
  int mj_integrator;   // mjtIntegrator under ckINT_MODEL
  double h;            // the model's timestep (the adaptive pairs' outer step)
  double tol;          // rtol = atol of the adaptive pairs
  std::string setting() const {
    return integrator == ckINT_MODEL ? "h " + Fmt(h) : "tol " + Fmt(tol);
  }
};

// one method's run
struct Outcome {
  bool ok = false;
  std::string why;       // why not ok
  double loss = 0;       // final x (m)
  double grad[6] = {};   // d loss / d initial velocity (free joint's 6 dofs)
  double fwd_ms = 0;     // the rollout
  double grad_ms = 0;    // ck_rolloutGrad (its forward pass included)
  long evaluations = 0;  // right-hand side evaluations (stages) of the rollout
};

double Ms(std::chrono::steady_clock::time_point a) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - a).count();
}

// the loss: the cube's x after the last step
struct LossUser {
  int last;
};
mjtNum FinalX(void* user, int t, const mjModel* m, const mjData* d, mjtNum* dx, mjtNum* ds) {
  if (t != static_cast<LossUser*>(user)->last) return 0;
  dx[0] = 1;  // the free joint's x translation is dof 0
  return d->qpos[0];
}

// the cube's state at the toss, with initial velocity v
void Toss(const mjModel* m, mjData* d, const double v[6]) {
  mj_resetData(m, d);
  for (int i = 0; i < 6; i++) d->qvel[i] = v[i];
}

// the rollout over horizon seconds (and with grad its gradient); times are the best of a few
// repetitions
Outcome Run(mjModel* m, const Method& me, const double v[6], double horizon, bool grad) {
  Outcome out;
  m->opt.timestep = me.h;
  m->opt.integrator = me.mj_integrator;
  ckSettings s;
  ck_defaultSettings(&s);
  s.solver = ckSOL_MUJOCO;
  s.integrator = me.integrator;
  if (me.integrator != ckINT_MODEL) s.adaptive.rtol = s.adaptive.atol = me.tol;
  s.adaptive.max_steps = 100000;
  s.adaptive.min_step = 1e-14;  // the contact's kinks (onset, stick-slip) at tight tolerances
  char err[512] = "";
  ckHandle* ck = ck_make(m, &s, err, sizeof(err));
  if (!ck) {
    out.why = err;
    return out;
  }
  mjData* d = mj_makeData(m);
  const int nstep = static_cast<int>(std::lround(horizon / me.h));
  const int stages = me.integrator != ckINT_MODEL ? 6 : me.mj_integrator == mjINT_RK4 ? 4 : 1;
  out.fwd_ms = out.grad_ms = HUGE_VAL;
  double spent = 0;
  for (int rep = 0; rep < 5 && (rep == 0 || spent < 300) && out.why.empty(); rep++) {
    Toss(m, d, v);
    ck_reset(ck);
    out.evaluations = 0;
    const auto t0 = std::chrono::steady_clock::now();
    for (int t = 0; t < nstep && out.why.empty(); t++) {
      ck_step(ck, m, d);
      if (ck_lastError(ck)[0]) out.why = ck_lastError(ck);
      out.evaluations += me.integrator == ckINT_MODEL
                             ? stages
                             : stages * (ck_stepInfo(ck)->accepted + ck_stepInfo(ck)->rejected);
    }
    const double ms = Ms(t0);
    out.fwd_ms = std::min(out.fwd_ms, ms);
    spent += ms;
    out.loss = d->qpos[0];
    if (out.why.empty() && (!std::isfinite(out.loss) || mju_norm(d->qvel, 6) > 1e3)) {
      out.why = "the rollout diverged";
    }
  }
  spent = 0;
  LossUser user{nstep - 1};
  std::vector<double> gx0(12);
  for (int rep = 0; grad && rep < 5 && (rep == 0 || spent < 300) && out.why.empty(); rep++) {
    Toss(m, d, v);
    ck_reset(ck);
    mjtNum value = 0;
    const auto t0 = std::chrono::steady_clock::now();
    const int r =
        ck_rolloutGrad(ck, m, d, nstep, nullptr, FinalX, &user, &value, gx0.data(), nullptr);
    const double ms = Ms(t0);
    out.grad_ms = std::min(out.grad_ms, ms);
    spent += ms;
    if (r != 0) out.why = std::string("ck_rolloutGrad: ") + ck_lastError(ck);
    for (int i = 0; i < 6; i++) out.grad[i] = gx0[6 + i];
  }
  out.ok = out.why.empty();
  mj_deleteData(d);
  ck_free(ck);
  return out;
}

// the methods compared
std::vector<Method> Methods(bool quick) {
  std::vector<Method> out;
  const std::vector<double> hs = quick
                                     ? std::vector<double>{2e-3, 5e-4}
                                     : std::vector<double>{4e-3, 2e-3, 1e-3, 5e-4, 2.5e-4, 1.25e-4};
  const std::vector<double> tols = quick ? std::vector<double>{1e-4, 1e-7}
                                         : std::vector<double>{1e-3, 1e-4, 1e-5, 1e-6, 1e-7, 1e-8};
  for (double h : hs) out.push_back({"euler", ckINT_MODEL, mjINT_EULER, h, 0});
  for (double h : hs) out.push_back({"rk4", ckINT_MODEL, mjINT_RK4, h, 0});
  for (double tol : tols) out.push_back({"tsit5", ckINT_TSIT5, mjINT_EULER, 0.01, tol});
  for (double tol : tols) out.push_back({"dopri5", ckINT_DOPRI5, mjINT_EULER, 0.01, tol});
  return out;
}

double Norm6(const double* x) {
  double s = 0;
  for (int i = 0; i < 6; i++) s += x[i] * x[i];
  return std::sqrt(s);
}

// the gradient of method me's loss by central differences (eps) in each initial velocity
bool Differences(mjModel* m, const Method& me, double horizon, double eps, double fd[6],
                 std::string* why) {
  for (int k = 0; k < 6; k++) {
    double l[2];
    for (int side = 0; side < 2; side++) {
      double v[6] = {kVx, 0, 0, 0, 0, 0};
      v[k] += side ? -eps : eps;
      const Outcome o = Run(m, me, v, horizon, false);
      if (!o.ok) {
        *why = "a difference of " + me.family + " " + me.setting() + " failed: " + o.why;
        return false;
      }
      l[side] = o.loss;
    }
    fd[k] = (l[0] - l[1]) / (2 * eps);
  }
  return true;
}

// the reference: loss and analytic gradient at the tight tolerance, and the gradient by central
// differences of its loss; false with the reason
bool Reference(mjModel* m, double horizon, Outcome* ref, double fd[6], std::string* why) {
  const Method me{"tsit5", ckINT_TSIT5, mjINT_EULER, 0.01, kRefTol};
  const double v0[6] = {kVx, 0, 0, 0, 0, 0};
  *ref = Run(m, me, v0, horizon, true);
  if (!ref->ok) {
    *why = "the reference (tsit5 at " + Fmt(kRefTol) + ") failed: " + ref->why;
    return false;
  }
  return Differences(m, me, horizon, kRefEps, fd, why);
}

// Fig. 3 / Fig. 21: each primitive's loss and gradient, MuJoCo's Euler at 0.002 s and tsit5 at
// 1e-7, against the primitive's reference, and against central differences of the same
// integrator's own loss; the Markdown, or empty with why
std::string Primitives(const TossOptions& o, double horizon, std::string* why) {
  const Method methods[] = {{"euler", ckINT_MODEL, mjINT_EULER, 0.002, 0},
                            {"tsit5", ckINT_TSIT5, mjINT_EULER, 0.01, 1e-7}};
  std::ofstream csv(o.out + "/diffmjx_toss_primitives.csv");
  csv << "primitive,integrator,loss_error,gradient_error,own_difference_error,gradient_ms\n";
  std::vector<std::vector<std::string>> rows;
  for (const auto& [name, geom] : kPrimitives) {
    if (o.quick && std::string(name) != "sphere") continue;  // the quick run: the sphere only
    char err[1000] = "";
    mjModel* m = ck_loadXMLString(TossXml(geom).c_str(), err, sizeof(err));
    if (!m) {
      *why = std::string(name) + ": " + err;
      return "";
    }
    m->opt.tolerance = 1e-14;
    m->opt.iterations = 200;
    Outcome ref;
    double ref_fd[6];
    if (!Reference(m, horizon, &ref, ref_fd, why)) {
      *why = std::string(name) + ": " + *why;
      mj_deleteModel(m);
      return "";
    }
    for (const Method& me : methods) {
      const double v0[6] = {kVx, 0, 0, 0, 0, 0};
      const Outcome r = Run(m, me, v0, horizon, true);
      double fd[6];
      std::string fd_why;
      if (!r.ok || !Differences(m, me, horizon, 1e-6, fd, &fd_why)) {
        rows.push_back({name, me.family + " " + me.setting(), "-", "-", "-", "-"});
        csv << name << "," << me.family << ",,,,\n";
        continue;
      }
      double diff[6], own[6];
      for (int k = 0; k < 6; k++) {
        diff[k] = r.grad[k] - ref_fd[k];
        own[k] = r.grad[k] - fd[k];
      }
      const double gerr = Norm6(diff) / Norm6(ref_fd), oerr = Norm6(own) / Norm6(fd);
      const double lerr = std::fabs(r.loss - ref.loss);
      csv << name << "," << me.family << "," << lerr << "," << gerr << "," << oerr << ","
          << r.grad_ms << "\n";
      rows.push_back({name, me.family + " " + me.setting(), Fmt(lerr, "%.1e"), Fmt(gerr, "%.1e"),
                      Fmt(oerr, "%.1e"), Fmt(r.grad_ms, "%.1f")});
    }
    mj_deleteModel(m);
  }
  return "### Primitives tossed (DiffMJX Fig. 3 and 21)\n\n" +
         tools::MarkdownTable({"primitive", "integrator", "loss error (m)", "gradient error",
                               "vs own differences", "gradient (ms)"},
                              rows) +
         "\nEach primitive (10 cm across, 1 kg) tossed as the cube is. gradient error: the "
         "analytic gradient (ck_rolloutGrad) against the primitive's reference (tsit5 at " +
         Fmt(kRefTol) +
         ", central differences), relative over the 6 initial velocities. vs own "
         "differences: against central differences (eps 1e-6) of the same integrator's loss; for "
         "Euler this checks that the gradient is the exact derivative of its discrete map (it is, "
         "while that map's loss and slope are off the continuous ones); for the adaptive pair "
         "such differences see the step-size controller's choices (jumps of the order of the "
         "tolerance over eps) and are not a reference.\n";
}

}  // namespace

int TossBench(const TossOptions& o, std::string* report) {
  char err[1000] = "";
  mjModel* m = ck_loadXMLString(TossXml(kPrimitives[0].second).c_str(), err, sizeof(err));
  if (!m) {
    std::fprintf(stderr, "ck-bench: diffmjx-toss: %s\n", err);
    return 2;
  }
  // MuJoCo's solver converged, so that its forces are a smooth force law of the state
  m->opt.tolerance = 1e-14;
  m->opt.iterations = 200;
  const double horizon = o.quick ? 0.5 : 1.0;
  Outcome ref;
  double fd[6];
  std::string why;
  if (!Reference(m, horizon, &ref, fd, &why)) {
    std::fprintf(stderr, "ck-bench: diffmjx-toss: %s\n", why.c_str());
    mj_deleteModel(m);
    return 2;
  }
  double diff[6];
  for (int i = 0; i < 6; i++) diff[i] = ref.grad[i] - fd[i];
  const double ref_agreement = Norm6(diff) / Norm6(fd);

  std::ofstream csv(o.out + "/diffmjx_toss.csv");
  csv << "integrator,h,tol,evaluations,loss,loss_error,gradient_error,forward_ms,gradient_ms,"
         "status\n";
  std::vector<std::vector<std::string>> rows;
  PlotSpec grad_plot{"Cube toss (DiffMJX Fig. 5/17): gradient",
                     "gradient time (ms)",
                     "relative gradient error",
                     true,
                     true,
                     {},
                     {},
                     false};
  PlotSpec loss_plot{"Cube toss (DiffMJX Fig. 5/17): loss",
                     "forward time (ms)",
                     "loss error (m)",
                     true,
                     true,
                     {},
                     {},
                     false};
  const std::vector<Method> methods = Methods(o.quick);
  std::string failed;
  for (size_t i = 0; i < methods.size(); i++) {
    const Method& me = methods[i];
    const double v0[6] = {kVx, 0, 0, 0, 0, 0};
    const Outcome r = Run(m, me, v0, horizon, true);
    for (int k = 0; k < 6; k++) diff[k] = r.grad[k] - fd[k];
    const double gerr = Norm6(diff) / Norm6(fd), lerr = std::fabs(r.loss - ref.loss);
    csv << me.family << "," << (me.integrator == ckINT_MODEL ? me.h : 0) << "," << me.tol << ","
        << r.evaluations << "," << r.loss << "," << lerr << "," << gerr << "," << r.fwd_ms << ","
        << r.grad_ms << "," << (r.ok ? "ok" : "failed") << "\n";
    if (!r.ok) {
      // a failed run has no error or time to show: its reason is listed under the table
      rows.push_back({me.family, me.setting(), "-", "-", "-", "-", "-"});
      failed += "- " + me.family + " " + me.setting() + ": " + r.why + "\n";
    } else {
      rows.push_back({me.family, me.setting(), std::to_string(r.evaluations), Fmt(lerr, "%.2e"),
                      Fmt(gerr, "%.2e"), Fmt(r.fwd_ms, "%.2f"), Fmt(r.grad_ms, "%.2f")});
      for (PlotSpec* p : {&grad_plot, &loss_plot}) {
        if (p->series.empty() || p->series.back().name != me.family) {
          p->series.push_back({me.family, {}, {}});
        }
      }
      grad_plot.series.back().x.push_back(r.grad_ms);
      grad_plot.series.back().y.push_back(std::max(gerr, 1e-16));
      loss_plot.series.back().x.push_back(r.fwd_ms);
      loss_plot.series.back().y.push_back(std::max(lerr, 1e-16));
    }
    if (o.progress)
      tools::Progress("diffmjx-toss", static_cast<int>(i + 1), static_cast<int>(methods.size()));
  }
  if (o.progress) tools::ClearProgress();
  mj_deleteModel(m);
  for (const auto& [name, spec] :
       {std::pair<std::string, const PlotSpec*>{"diffmjx_toss", &grad_plot},
        {"diffmjx_toss_loss", &loss_plot}}) {
    std::string perr;
    if (o.plots && !Plot(o.out + "/" + name + ".png", *spec, &perr)) {
      std::fprintf(stderr, "ck-bench: plot %s skipped: %s\n", name.c_str(), perr.c_str());
    }
  }
  std::string text =
      "### Cube toss: gradient error against time (DiffMJX Fig. 5 and 17)\n\n" +
      tools::MarkdownTable({"integrator", "step / tolerance", "evaluations", "loss error (m)",
                            "gradient error", "forward (ms)", "gradient (ms)"},
                           rows) +
      "\nA 10 cm cube, 1 kg, tossed at v_x = " + Fmt(kVx) +
      " m/s from 0.3 m, tilted, onto a floor " +
      "with solref 0.005 1 and solimp 0 0.95 0.001 0.5 2 (the paper's settings; refsafe off, so " +
      "that every integrator simulates the same contact); loss: its x " + "after " + Fmt(horizon) +
      " s; gradient: d loss / d initial velocity (6 dofs) by " +
      "ck_rolloutGrad, relative error against the reference. Reference: tsit5 at tolerance " +
      Fmt(kRefTol) + " (loss " + Fmt(ref.loss, "%.6f") + " m), its gradient by central " +
      "differences (eps " + Fmt(kRefEps) + "); its own analytic gradient agrees with them to " +
      Fmt(ref_agreement, "%.1e") + ". evaluations: right-hand sides (stages) of the rollout; " +
      "euler and rk4 are MuJoCo's fixed-step integrators at step h; tsit5 and dopri5 take " +
      "adaptive internal steps within a 0.01 s step at rtol = atol = tol. MuJoCo's solver " +
      "converged (tolerance 1e-14). Times: best of up to 5 runs, one thread.\n";
  if (!failed.empty()) text += "\nRuns that failed:\n" + failed;
  const std::string primitives = Primitives(o, horizon, &why);
  if (primitives.empty()) {
    std::fprintf(stderr, "ck-bench: diffmjx-toss: %s\n", why.c_str());
    return 2;
  }
  text += "\n" + primitives;
  std::printf("\n%s\n", text.c_str());
  *report += text + "\n";
  return 0;
}

}  // namespace contactkit::bench
