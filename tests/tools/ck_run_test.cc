// Copyright 2026 The contactkit developers.
//
// The tools' shared run statistics and ck-run: energy drift is energy created, not energy lost in
// a fall; runs that really diverge are reported as diverged (and normal ones are not); ck-run
// prints a row per solver, counts contactkit's warnings in a column and finds Menagerie models
// through CK_MENAGERIE.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "contactkit/contactkit.h"
#include "support/fixture.h"
#include "tests/tools/process.h"
#include "tools/common/divergence.h"
#include "tools/common/tool_util.h"

namespace contactkit::test {
namespace {

using tools::DivergenceLimits;
using tools::RunOptions;
using tools::RunStats;

// one body on one joint: <option> attributes, the joint's and the geom's, and what follows
// <worldbody>
std::string JointScene(const std::string& option, const std::string& joint, const std::string& geom,
                       const std::string& tail = "") {
  return "<mujoco>\n  <option " + option + "/>\n  <worldbody>\n    <body>\n      <joint " + joint +
         "/>\n      <geom " + geom + " mass=\"1\"/>\n    </body>\n  </worldbody>\n" + tail +
         "</mujoco>\n";
}

// a 1 kg free body at height z above the floor, optionally with a keyframe
std::string FloorScene(double h, double z, const std::string& geom, const std::string& key = "") {
  return "<mujoco>\n  <option timestep=\"" + std::to_string(h) +
         "\"/>\n  <worldbody>\n    <geom type=\"plane\" size=\"2 2 .1\"/>\n    <body pos=\"0 0 " +
         std::to_string(z) + "\">\n      <freejoint/>\n      <geom " + geom +
         " mass=\"1\"/>\n    </body>\n  </worldbody>\n" + key + "</mujoco>\n";
}

const char kBox[] = "type=\"box\" size=\"0.05 0.05 0.05\"";

// point-like bob on a 0.5 m massless rod, started horizontal, no friction or damping
const std::string kPendulum =
    JointScene("timestep=\"0.0005\" integrator=\"RK4\"", "type=\"hinge\" axis=\"0 1 0\"",
               "type=\"sphere\" size=\"0.01\" pos=\"0.5 0 0\"");

// box dropped from 0.5 m onto the floor
const std::string kDrop = FloorScene(0.002, 0.55, kBox);

// a wheel driven by a constant 1 N m torque, no gravity
const std::string kWheel =
    JointScene("gravity=\"0 0 0\" timestep=\"0.001\"",
               "name=\"axle\" type=\"hinge\" axis=\"0 0 1\"", "type=\"cylinder\" size=\"0.2 0.02\"",
               "  <actuator><motor joint=\"axle\" gear=\"1\"/></actuator>\n"
               "  <keyframe><key ctrl=\"1\"/></keyframe>\n");

// a stiff joint spring, integrated explicitly far beyond its stability limit (h w = 100)
const std::string kUnstable = JointScene(
    "timestep=\"0.01\" gravity=\"0 0 0\"", "type=\"hinge\" axis=\"0 0 1\" stiffness=\"1e6\"",
    "type=\"sphere\" size=\"0.1\" pos=\"0.1 0 0\"", "  <keyframe><key qpos=\"0.1\"/></keyframe>\n");

// a ball thrown at the floor at 20 m/s: at h = 0.02 it is 0.4 m deep before it is seen
const std::string kThrown =
    FloorScene(0.02, 0.3, "type=\"sphere\" size=\"0.05\"",
               "  <keyframe><key qpos=\"0 0 0.3 1 0 0 0\" qvel=\"0 0 -20 0 0 0\"/></keyframe>\n");

// ck_step from d's state, following its energy drift
void StepWithEnergy(const mjModel* m, mjData* d, ckHandle* ck, int steps,
                    tools::EnergyDrift* energy) {
  mj_forward(m, d);
  energy->Start(m, d);
  std::vector<mjtNum> v(m->nv);
  for (int t = 0; t < steps; t++) {
    mju_copy(v.data(), d->qvel, m->nv);
    ck_step(ck, m, d);
    energy->Step(m, d, v.data());
  }
}

class RunTest : public MujocoTest {
 protected:
  RunStats RunModel(const std::string& xml, int solver, int steps,
                    const DivergenceLimits& limits = {}) {
    ModelPtr m = LoadString(xml);
    EXPECT_TRUE(m);
    if (!m) return {};
    RunOptions o;
    o.steps = steps;
    o.limits = limits;
    RunStats st = tools::Run(m.get(), Settings(solver), o);
    EXPECT_EQ(st.error, "");
    return st;
  }
};

TEST_F(RunTest, ConservativePendulumHasNoDrift) {
  // m g l = 4.9 J swings between potential and kinetic energy
  const RunStats st = RunModel(kPendulum, ckSOL_MUJOCO, 4000);
  EXPECT_FALSE(st.diverged) << st.why;
  EXPECT_LT(st.energy_drift, 1e-6 * 9.81 * 0.5);
  EXPECT_GE(st.energy_drift, 0);
}

TEST_F(RunTest, FallThatComesToRestIsNotDrift) {
  const double fall = 9.81 * 0.5;  // m g h of the drop (J)
  for (int s = 0; s < ckNSOLVER; s++) {
    if (!ck_solverAvailable(s)) continue;
    ModelPtr m = LoadString(kDrop);
    ASSERT_TRUE(m);
    RunOptions o;
    o.steps = 1000;
    const RunStats st = tools::Run(m.get(), Settings(s), o);
    ASSERT_EQ(st.error, "");
    EXPECT_FALSE(st.diverged) << ck_solverName(s) << ": " << st.why;
    // the same run by hand: the fall's energy is gone at rest, and none of it counts as drift
    mjData* d = mj_makeData(m.get());
    ckSettings settings = Settings(s);
    HandlePtr ck = Make(m.get(), &settings);
    tools::EnergyDrift energy;
    StepWithEnergy(m.get(), d, ck.get(), 1000, &energy);
    const double lost = -energy.current();
    mj_deleteData(d);
    EXPECT_GT(lost, 0.9 * fall) << ck_solverName(s) << ": the box came to rest";
    EXPECT_LT(st.energy_drift, 0.01 * fall) << ck_solverName(s);
    EXPECT_NEAR(st.energy_drift, energy.max(), 1e-9) << ck_solverName(s);
  }
}

// a box started 5 mm deep in the floor: lcp's velocity-level correction (split_impulse = 0, erp 1)
// throws it up at about 2.5 m/s, energy the solver created; the position pass only lifts it out
TEST_F(RunTest, EnergyCreatedBySolverIsDrift) {
  if (!ck_solverAvailable(ckSOL_LCP)) GTEST_SKIP() << "solver lcp is not in this build";
  ModelPtr m = LoadString(FloorScene(0.002, 0.045, kBox));
  ASSERT_TRUE(m);
  RunOptions o;
  o.steps = 500;
  ckSettings s = Settings(ckSOL_LCP);
  s.lcp.split_impulse = 0;
  const RunStats thrown = tools::Run(m.get(), s, o);
  EXPECT_GT(thrown.energy_drift, 1.0) << "1/2 m v^2 at 2.5 m/s is 3 J";
  s.lcp.split_impulse = 1;
  // lifting it out by positions adds only the potential energy of the 5 mm, m g 0.005 = 0.049 J
  const RunStats projected = tools::Run(m.get(), s, o);
  EXPECT_LT(projected.energy_drift, 1.05 * 9.81 * 0.005);
}

TEST_F(RunTest, ActuatorWorkIsNotDrift) {
  ModelPtr m = LoadString(kWheel);
  ASSERT_TRUE(m);
  mjData* d = mj_makeData(m.get());
  mj_resetDataKeyframe(m.get(), d, 0);
  HandlePtr ck = Make(m.get());
  tools::EnergyDrift energy;
  StepWithEnergy(m.get(), d, ck.get(), 1000, &energy);
  // 1 N m for 1 s on I = 0.02 kg m^2: 25 J of kinetic energy, all of it put in by the motor
  const double kinetic = 0.5 * 0.02 * d->qvel[0] * d->qvel[0];
  EXPECT_GT(kinetic, 20);
  EXPECT_LT(std::fabs(energy.current()), 1e-3 * kinetic);
  EXPECT_LT(energy.max(), 1e-3 * kinetic);
  mj_deleteData(d);
  const RunStats st = RunModel(kWheel, ckSOL_MUJOCO, 1000);
  EXPECT_LT(st.energy_drift, 1e-3 * kinetic);
}

// --random-controls: the wheel's motor (unlimited: [-1, 1]) gets a new uniform draw every 20 ms
// of simulated time and holds it in between; the same seed gives the same draws, another seed
// others
TEST_F(RunTest, RandomControlsAreRedrawnEvery20Ms) {
  ModelPtr m = LoadString(kWheel);
  ASSERT_TRUE(m);
  auto controls = [&](int seed) {
    RunOptions o;
    o.steps = 100;  // 0.1 s at h = 0.001
    o.random_controls = seed;
    std::vector<double> ctrl;
    o.on_step = [&ctrl](const mjModel*, const mjData* d, const ckHandle*, int) {
      ctrl.push_back(d->ctrl[0]);
    };
    tools::Run(m.get(), Settings(ckSOL_MUJOCO), o);
    return ctrl;
  };
  const std::vector<double> a = controls(12345), b = controls(12345), c = controls(7);
  ASSERT_EQ(a.size(), 100u);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  int changes = 0;
  for (size_t t = 0; t < a.size(); t++) {
    EXPECT_LE(std::fabs(a[t]), 1);
    if (t > 0 && a[t] != a[t - 1]) {
      changes++;
      EXPECT_EQ(t % 20, 0u) << "step " << t;  // drawn before steps 0, 20, 40, ...
    }
  }
  EXPECT_EQ(changes, 4);
}

TEST_F(RunTest, ExplodingVelocityIsDiverged) {
  for (int s = 0; s < ckNSOLVER; s++) {
    if (!ck_solverAvailable(s)) continue;
    const RunStats st = RunModel(kUnstable, s, 200);
    EXPECT_TRUE(st.diverged) << ck_solverName(s);
    EXPECT_NE(st.why.find("|qvel|"), std::string::npos) << st.why;
    EXPECT_LT(st.steps, 200) << "the run stops where it diverged";
  }
}

TEST_F(RunTest, MujocoResetIsDiverged) {
  // without a velocity bound the explosion runs until MuJoCo resets the state
  DivergenceLimits limits;
  limits.max_qvel = std::numeric_limits<double>::infinity();
  const RunStats st = RunModel(kUnstable, ckSOL_MUJOCO, 200, limits);
  TakeWarnings("");  // MuJoCo's own warning of the reset
  EXPECT_TRUE(st.diverged);
  EXPECT_NE(st.why.find("MuJoCo reset the state (bad"), std::string::npos) << st.why;
}

TEST_F(RunTest, DeepPenetrationIsDiverged) {
  const RunStats st = RunModel(kThrown, ckSOL_MUJOCO, 50);
  EXPECT_TRUE(st.diverged);
  EXPECT_NE(st.why.find("penetration"), std::string::npos) << st.why;
  DivergenceLimits loose;
  loose.max_penetration = 1;
  EXPECT_FALSE(RunModel(kThrown, ckSOL_MUJOCO, 50, loose).diverged);
}

TEST_F(RunTest, NormalRunsAreNotDiverged) {
  for (int s = 0; s < ckNSOLVER; s++) {
    if (!ck_solverAvailable(s)) continue;
    for (const std::string& xml : {kDrop, kPendulum}) {
      const RunStats st = RunModel(xml, s, 500);
      EXPECT_FALSE(st.diverged) << ck_solverName(s) << ": " << st.why;
      EXPECT_EQ(st.steps, 500);
      EXPECT_GT(st.step_time, 0);
    }
  }
}

//---------------------------------- ck-run --------------------------------------------------------

#ifdef CK_RUN
const char kRun[] = CK_RUN;

class CkRunTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = MakeTempDir("ckrun"); }
  void TearDown() override { RunProcess({"rm", "-rf", dir_}); }
  std::string Write(const std::string& name, const std::string& text) {
    const std::string path = dir_ + "/" + name;
    FILE* f = std::fopen(path.c_str(), "w");
    std::fputs(text.c_str(), f);
    std::fclose(f);
    return path;
  }
  std::string dir_;
};

// the table row of a solver
std::string RowOf(const std::string& out, const std::string& solver) {
  const size_t at = out.find("| " + solver + " ");
  if (at == std::string::npos) return "";
  return out.substr(at, out.find('\n', at) - at);
}

TEST_F(CkRunTest, DivergedRowSaysWhyInsteadOfATime) {
  const ProcessResult r = RunProcess({kRun, Write("unstable.xml", kUnstable), "--compare",
                                      "mujoco,ipm", "--steps", "100", "--quiet"});
  EXPECT_EQ(r.status, 1) << r.out << r.err;
  for (const char* s : {"mujoco", "ipm"}) {
    const std::string row = RowOf(r.out, s);
    EXPECT_NE(row.find("| DIVERGED "), std::string::npos) << row;
    EXPECT_NE(row.find("DIVERGED: |qvel|"), std::string::npos) << row;
  }
}

// docs/settings.md holds the table that ck-run --list-settings prints from the one settings table
TEST_F(CkRunTest, SettingsDocIsCurrent) {
  const ProcessResult r = RunProcess({kRun, "--list-settings"});
  ASSERT_EQ(r.status, 0) << r.err;
  ASSERT_NE(r.out.find("| `solver`"), std::string::npos) << r.out;
  const std::string doc = ReadFile(std::string(CK_SOURCE_DIR) + "/docs/settings.md");
  EXPECT_NE(doc.find(r.out), std::string::npos)
      << "docs/settings.md is not current: paste the output of ck-run --list-settings into it";
}

TEST_F(CkRunTest, NormalRunPrintsTimes) {
  const ProcessResult r =
      RunProcess({kRun, "box_sliding", "--compare", "all", "--steps", "300", "--quiet"});
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_EQ(r.out.find("DIVERGED"), std::string::npos) << r.out;
  for (int s = 0; s < ckNSOLVER; s++) {
    if (!ck_solverAvailable(s)) continue;
    const std::string row = RowOf(r.out, ck_solverName(s));
    ASSERT_NE(row, "") << r.out;
    EXPECT_NE(row.find("| ok"), std::string::npos) << row;
    // the second cell is the time per step
    const size_t a = row.find('|', 1) + 1;
    EXPECT_GT(std::stod(row.substr(a, row.find('|', a) - a)), 0) << row;
  }
  EXPECT_EQ(r.err, "") << "no progress bar when stderr is not a terminal";
}

TEST_F(CkRunTest, ContactkitWarningsAreCountedNotPrinted) {
  // lcp with one pivot and one Gauss-Seidel sweep: its solves end at their iteration limit
  const ProcessResult r = RunProcess({kRun, "stacked_primitives", "--solver", "lcp", "--set",
                                      "max_pivots=1", "--set", "pgs_iter=1", "--steps", "100"});
  EXPECT_EQ(r.err.find("WARNING"), std::string::npos) << r.err;
  const std::string row = RowOf(r.out, "lcp");
  ASSERT_NE(row, "") << r.out;
  // the cell before the status: contactkit's warnings
  const size_t end = row.rfind('|', row.rfind('|') - 1);
  const size_t begin = row.rfind('|', end - 1) + 1;
  EXPECT_GT(std::stoi(row.substr(begin, end - begin)), 0) << row;
  const size_t listed = r.out.find("- lcp: contactkit: solver reached its iteration limit");
  EXPECT_NE(listed, std::string::npos) << r.out;
  EXPECT_GT(listed, r.out.find(row)) << "listed under the table";
}

// bad command lines exit with 2 and a message that names the option and what it takes
TEST_F(CkRunTest, BadInputIsNamed) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--steps", "0"}, "ck-run: --steps takes a positive integer, got '0'"},
      {{"--steps", "many"}, "ck-run: --steps takes a positive integer, got 'many'"},
      {{"--timestep", "-1"}, "ck-run: --timestep takes a positive number of seconds, got '-1'"},
      {{"--margin", "x"}, "ck-run: --margin takes a non-negative distance in meters, got 'x'"},
      {{"--max-qvel", "0"}, "ck-run: --max-qvel takes a positive speed, got '0'"},
      {{"--integrator", "rk5"},
       "ck-run: --integrator: unknown integrator 'rk5'; allowed: euler, rk4, implicit"},
      {{"--solver", "pgs"},
       "ck-run: --solver: unknown solver 'pgs'; allowed: mujoco, ipm, comfree, lcp"},
      {{"--compare", "mujoco,pgs"}, "ck-run: --compare: unknown solver 'pgs'"},
      {{"--solver", "ipm", "--compare", "all"}, "ck-run: give --solver or --compare, not both"},
      {{"--set", "kappa_tol"}, "ck-run: --set takes KEY=VALUE, got 'kappa_tol'"},
      {{"--key", "3"}, "ck-run: model has 1 keyframes; --key 3 is out of range"},
      {{"--steps"}, "ck-run: --steps needs a value"},
      {{"--stpes", "5"}, "ck-run: unknown option '--stpes'\n\nusage: ck-run MODEL"},
      {{"box_on_plane"}, "ck-run: more than one model given ('box_sliding', 'box_on_plane')"},
  };
  for (const auto& [args, message] : cases) {
    std::vector<std::string> argv = {kRun, "box_sliding", "--quiet"};
    argv.insert(argv.end(), args.begin(), args.end());
    const ProcessResult r = RunProcess(argv);
    EXPECT_EQ(r.status, 2) << args[0];
    EXPECT_EQ(r.err.rfind(message, 0), 0u) << r.err;
    EXPECT_EQ(r.out, "") << args[0];
  }
}

TEST_F(CkRunTest, HelpGoesToStdout) {
  const ProcessResult r = RunProcess({kRun, "--help"});
  EXPECT_EQ(r.status, 0);
  EXPECT_EQ(r.out.rfind("usage: ck-run MODEL [options]", 0), 0u) << r.out;
  EXPECT_NE(r.out.find("CK_MENAGERIE"), std::string::npos) << r.out;
  EXPECT_EQ(r.err, "");
  const ProcessResult none = RunProcess({kRun});
  EXPECT_EQ(none.status, 2);
  EXPECT_EQ(none.err, r.out) << "no model: the usage on stderr";
}

TEST_F(CkRunTest, MenagerieModelsThroughTheEnvironment) {
  const std::string dir = CK_SHARED_MODELS;
  if (!FileExists(dir + "/franka_emika_panda/scene.xml")) GTEST_SKIP() << dir << " is absent";
  // without the variable (empty is unset; the caller's environment may hold it)
  ProcessResult r = RunProcess({kRun, "franka_emika_panda/scene", "--steps", "5", "--quiet"},
                               {{"CK_MENAGERIE", ""}});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("CK_MENAGERIE"), std::string::npos) << r.err;
  r = RunProcess({kRun, "franka_emika_panda/scene", "--steps", "5", "--quiet"},
                 {{"CK_MENAGERIE", dir}});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("franka_emika_panda/scene"), std::string::npos) << r.out;
  r = RunProcess({kRun, "franka_emika_panda/scene", "--menagerie", dir, "--steps", "5", "--quiet"});
  EXPECT_EQ(r.status, 0) << r.err;
  // the version as MuJoCo writes it
  EXPECT_NE(r.out.find(std::string("MuJoCo ") + mj_versionString()), std::string::npos) << r.out;
  EXPECT_NE(std::string(mj_versionString()).find('.'), std::string::npos);
}

// the shared Unitree A1 lacks two visual meshes of its original file: ck-run says so and loads
// the variant that leaves them out (on 2.2.2 the variant is what it finds first)
TEST_F(CkRunTest, IncompleteMenagerieModelLoadsItsVariant) {
  const std::string dir = CK_SHARED_MODELS;
  if (!FileExists(dir + "/unitree_a1/scene_mj222.xml")) GTEST_SKIP() << dir << " is absent";
  const ProcessResult r =
      RunProcess({kRun, "unitree_a1/scene", "--menagerie", dir, "--steps", "5", "--solver", "lcp"});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("| lcp"), std::string::npos) << r.out;
  if (mjVERSION_HEADER >= 300 && !FileExists(dir + "/unitree_a1/assets/trunk.obj")) {
    EXPECT_NE(r.err.find("scene_mj222.xml instead"), std::string::npos) << r.err;
  }
  // the model line names the file read
  EXPECT_NE(r.out.find("unitree_a1/scene_mj222.xml: nv=18"), std::string::npos) << r.out;
}
#endif

//---------------------------------- ck-jac-ratio --------------------------------------------------

#ifdef CK_JAC_RATIO
// --set reaches every solver's handle: a valid key runs, a malformed pair, an unknown key and an
// out-of-range value each stop the tool with a message naming them, and so does a kappa_grad
// below kappa_tol, which the handle refuses
TEST(CkJacRatioTest, SetReachesTheHandlesAndBadSettingsAreNamed) {
  const std::vector<std::string> base = {CK_JAC_RATIO, "box_sliding", "--steps",   "5",
                                         "--rounds",   "1",           "--solvers", "ipm"};
  auto run = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = base;
    args.insert(args.end(), extra.begin(), extra.end());
    return RunProcess(args);
  };
  ProcessResult r = run({"--set", "max_iter=80", "--set", "kappa_grad=1e-4"});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("ipm      jac"), std::string::npos) << r.out;
  r = run({"--set", "max_iter"});
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("KEY=VALUE, got 'max_iter'"), std::string::npos) << r.err;
  r = run({"--set", "no_such_key=1"});
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("no_such_key"), std::string::npos) << r.err;
  r = run({"--set", "max_iter=0"});
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("max_iter"), std::string::npos) << r.err;
  // kappa_grad below kappa_tol is refused by the handle, naming both
  r = run({"--set", "kappa_grad=1e-12"});
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("kappa_grad"), std::string::npos) << r.err;
}
#endif

}  // namespace
}  // namespace contactkit::test
