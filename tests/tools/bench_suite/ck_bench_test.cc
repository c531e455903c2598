// Copyright 2026 The contactkit developers.
//
// ck-bench smoke runs with --quick: every benchmark writes its CSV (one row per solver and case,
// numbers that make sense) and its Markdown table; bad input is named.
#include <gtest/gtest.h>

#include <cmath>
#include <sstream>
#include <string>
#include <vector>

#include "contactkit/contactkit.h"
#include "support/fixture.h"
#include "tests/tools/process.h"

namespace contactkit::test {
namespace {

#ifdef CK_BENCH
const char kBench[] = CK_BENCH;
#endif

int AvailableSolvers() {
  int n = 0;
  for (int s = 0; s < ckNSOLVER; s++) n += ck_solverAvailable(s);
  return n;
}

std::vector<std::vector<std::string>> ReadCsv(const std::string& path) {
  std::vector<std::vector<std::string>> rows;
  std::stringstream in(ReadFile(path));
  for (std::string line; std::getline(in, line);) {
    std::vector<std::string> cells;
    std::stringstream ls(line);
    for (std::string c; std::getline(ls, c, ',');) cells.push_back(c);
    rows.push_back(cells);
  }
  return rows;
}

class BenchSuiteTest : public ::testing::Test {
 protected:
  void SetUp() override {
#ifndef CK_BENCH
    GTEST_SKIP() << "ck-bench is not built";
#else
    dir_ = MakeTempDir("bench");
#endif
  }
  void TearDown() override {
    if (!dir_.empty()) RunProcess({"rm", "-rf", dir_});
  }
  ProcessResult Bench(const std::string& cmd) {
#ifdef CK_BENCH
    // no Menagerie folder from the environment: robots are skipped unless a test names one
    return RunProcess({kBench, cmd, "--out", dir_, "--quick", "--quiet", "--no-plots"},
                      {{ "CK_MENAGERIE",
                         "" }});
#else
    return {};
#endif
  }
  std::string dir_;
};

TEST_F(BenchSuiteTest, DojoDropMeasuresMujocoPenetration) {
  const ProcessResult r = Bench("dojo-drop");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("Dojo Table II"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(std::string("MuJoCo ") + mj_versionString() + ","), std::string::npos)
      << "the version as MuJoCo writes it: " << r.out;
  const auto rows = ReadCsv(dir_ + "/dojo_drop.csv");
  ASSERT_EQ(rows.size(), 1u + 3u * AvailableSolvers());
  EXPECT_EQ(rows[0][0], "solver");
  for (size_t i = 1; i < rows.size(); i++) {
    ASSERT_EQ(rows[i].size(), 5u);
    // the shared divergence check: a contact deeper than 0.1 m is a diverged run, named as such
    if (std::stod(rows[i][3]) > 0.1) {
      EXPECT_EQ(rows[i][4], "1") << rows[i][0] << " at h = " << rows[i][1];
      EXPECT_NE(r.out.find(std::string("DIVERGED: ") + rows[i][0] + " at h = " + rows[i][1]),
                std::string::npos)
          << r.out;
    }
    // MuJoCo's soft contact penetrates the floor at 0.01 and 0.001 s (Dojo Table II)
    if (rows[i][0] == "mujoco" && rows[i][1] != "0.1") {
      EXPECT_GT(std::stod(rows[i][3]), 1e-3) << rows[i][1];
      EXPECT_EQ(rows[i][4], "0") << "MuJoCo fails at h = " << rows[i][1];
    }
  }
}

TEST_F(BenchSuiteTest, ScalingGrowsWithContacts) {
  const ProcessResult r = Bench("comfree-scaling");
  ASSERT_EQ(r.status, 0) << r.err;
  const auto rows = ReadCsv(dir_ + "/comfree_scaling.csv");
  ASSERT_EQ(rows.size(), 1u + 3u * AvailableSolvers());
  // for MuJoCo: more bodies, more contacts; every row timed (times are not compared across rows:
  // under a shared machine's load that is the benchmark's to report, not a test's)
  std::vector<double> contacts;
  for (size_t i = 1; i < rows.size(); i++) {
    if (rows[i][0] != "mujoco") continue;
    contacts.push_back(std::stod(rows[i][2]));
    const double ms = std::stod(rows[i][3]);
    EXPECT_TRUE(std::isfinite(ms) && ms > 0) << "step time " << rows[i][3] << " ms";
  }
  ASSERT_EQ(contacts.size(), 3u);
  EXPECT_GT(contacts[0], 0);
  EXPECT_GT(contacts[1], contacts[0]);
  EXPECT_GT(contacts[2], contacts[1]);
}

// comfree-slopes: every variant on every scene from the same settled state, with the slopes
TEST_F(BenchSuiteTest, SlopesTimeEveryVariantOnEveryScene) {
  const ProcessResult r = Bench("comfree-slopes");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("slope, constraint stage"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Target: comfree slope <= 1.1"), std::string::npos) << r.out;
  const auto rows = ReadCsv(dir_ + "/comfree_slopes.csv");
  ASSERT_EQ(rows.size(), 1u + 3u * 4u) << "3 scenes x comfree, newton, pgs, ipm";
  EXPECT_EQ(rows[0][3], "solver");
  for (size_t i = 1; i < rows.size(); i++) {
    ASSERT_EQ(rows[i].size(), 11u);
    EXPECT_GT(std::stod(rows[i][4]), 0) << rows[i][0] << " " << rows[i][3] << ": contacts";
    EXPECT_GT(std::stod(rows[i][5]), 0) << rows[i][0] << " " << rows[i][3] << ": step time";
    EXPECT_EQ(rows[i][9], "3") << rows[i][0] << " " << rows[i][3] << ": timed steps";
  }
#ifdef CK_BENCH
  const ProcessResult bad = RunProcess({kBench, "comfree-slopes", "--variants", "comfree,fast"});
  EXPECT_EQ(bad.status, 2);
  EXPECT_NE(bad.err.find("unknown variant 'fast'"), std::string::npos) << bad.err;
#endif
}

TEST_F(BenchSuiteTest, JacobianTableHasEveryModel) {
  const ProcessResult r = Bench("nimble-jacobian");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("| Humanoid"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("| Hopper"), std::string::npos) << r.out;
  const auto rows = ReadCsv(dir_ + "/nimble_jacobian.csv");
  ASSERT_GE(rows.size(), 3u);
  for (size_t i = 1; i < rows.size(); i++) {
    EXPECT_GT(std::stod(rows[i].back()), 0) << "MuJoCo's central differences take time";
  }
}

TEST_F(BenchSuiteTest, AbsentRobotsAreSkippedByName) {
#ifdef CK_BENCH
  const ProcessResult r = RunProcess({kBench, "dojo-speed", "--out", dir_, "--quick", "--quiet",
                                      "--no-plots", "--models-dir", "/nonexistent"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("skipping Unitree A1"), std::string::npos) << r.err;
  EXPECT_NE(r.out.find("Skipped Skydio X2"), std::string::npos) << r.out;
  const auto rows = ReadCsv(dir_ + "/dojo_speed.csv");
  ASSERT_EQ(rows.size(), 1u + AvailableSolvers()) << "humanoid only";
  EXPECT_EQ(rows[1][1], "Humanoid");
#endif
}

TEST_F(BenchSuiteTest, RobotsNeedAMenagerieFolder) {
#ifdef CK_BENCH
  // neither --menagerie nor CK_MENAGERIE: no robot, and the message says how to give them
  ProcessResult r = Bench("dojo-speed");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("skipping Franka Panda: no Menagerie folder (--menagerie or CK_MENAGERIE)"),
            std::string::npos)
      << r.err;
  // the environment variable names the folder
  const std::string dir = CK_SHARED_MODELS;
  if (!FileExists(dir + "/skydio_x2")) GTEST_SKIP() << dir << " is absent";
  r = RunProcess({kBench, "dojo-speed", "--out", dir_, "--quick", "--quiet", "--no-plots",
                  "--solvers", "mujoco"},
                 {{"CK_MENAGERIE", dir}});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.err.find("skipping Skydio X2"), std::string::npos) << r.err;
  EXPECT_NE(r.out.find("Skydio X2"), std::string::npos) << r.out;
#endif
}

// dojo-planning: every task with every gradient source; the box pushed right on hard contact
// reaches its goal within the quick run's 20 iterations; apart, the push gets no gradient
// without contacts from distance
TEST_F(BenchSuiteTest, PlanningRunsEveryTaskAndSource) {
  const ProcessResult r = Bench("dojo-planning");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("Dojo Table III"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("skipping the quadruped: no Menagerie folder"), std::string::npos) << r.err;
  const auto rows = ReadCsv(dir_ + "/dojo_planning.csv");
  // iLQR per solver (ipm twice, comfree with and without anchors and complementarity-aware, lcp,
  // mujoco and ipm also with complementarity-aware Jacobians) and MuJoCo's differences, Adam per
  // solver (comfree, lcp and mujoco also complementarity-aware); the push once more with contacts
  // from distance for every source but MuJoCo's differences
  const int sources = AvailableSolvers() + (ck_solverAvailable(ckSOL_IPM) ? 2 : 0) +
                      (ck_solverAvailable(ckSOL_COMFREE) ? 3 : 0) + 1 + AvailableSolvers() +
                      (ck_solverAvailable(ckSOL_LCP) ? 2 : 0) +
                      (ck_solverAvailable(ckSOL_MUJOCO) ? 2 : 0);
  ASSERT_EQ(rows.size(), 1u + 3u * sources + sources + (sources - 1));
  for (size_t i = 1; i < rows.size(); i++) {
    ASSERT_EQ(rows[i].size(), 8u);
    EXPECT_GT(std::stoi(rows[i][4]), 0) << rows[i][0] << " " << rows[i][1];
    if (rows[i][0] == "box right" && rows[i][1] == "lcp") {
      EXPECT_EQ(rows[i][7], "ok") << "violation " << rows[i][3];
    }
    if (rows[i][0] == "push" && rows[i][1].find("cfd") == std::string::npos) {
      EXPECT_NEAR(std::stod(rows[i][3]), 0.3, 1e-9) << rows[i][1] << ": the box never moves";
    }
  }
}

// the quadruped (the Menagerie Unitree A1 shifting its trunk) runs with a Menagerie folder: iLQR on
// MuJoCo's solver moves the trunk toward the goal within the quick run's three iterations (5 cm at
// the start)
TEST_F(BenchSuiteTest, PlanningTakesTheQuadrupedFromTheMenagerie) {
#ifdef CK_BENCH
  const std::string dir = CK_SHARED_MODELS;
  if (!FileExists(dir + "/unitree_a1")) GTEST_SKIP() << dir << " is absent";
  const ProcessResult r = RunProcess({kBench, "dojo-planning", "--out", dir_, "--quick", "--quiet",
                                      "--no-plots", "--solvers", "mujoco"},
                                     {{"CK_MENAGERIE", dir}});
  ASSERT_EQ(r.status, 0) << r.err;
  int quadruped = 0;
  for (const auto& row : ReadCsv(dir_ + "/dojo_planning.csv")) {
    if (row[0] != "quadruped") continue;
    quadruped++;
    if (row[1] == "mujoco") {
      EXPECT_LT(std::stod(row[3]), 0.049) << "the trunk did not move";
    }
  }
  EXPECT_EQ(quadruped, 5) << "iLQR on mujoco (plain and aware), on MuJoCo's differences, Adam on "
                             "mujoco (plain and aware)";
#endif
}

// diffmjx-toss: on the cube toss the adaptive pair's gradient at a tight tolerance is far closer
// to the reference than MuJoCo's Euler at its usual step, and its loss error falls with the
// tolerance (DiffMJX Fig. 5); likewise on the tossed sphere (Fig. 3)
TEST_F(BenchSuiteTest, TossGradientsOfTheAdaptivePairBeatTheFixedStep) {
  const ProcessResult r = Bench("diffmjx-toss");
  ASSERT_EQ(r.status, 0) << r.err;
  const auto rows = ReadCsv(dir_ + "/diffmjx_toss.csv");
  ASSERT_EQ(rows.size(), 9u);  // euler, rk4 at two steps; tsit5, dopri5 at two tolerances
  double euler = -1, tsit_loose = -1, tsit_tight = -1, tsit_tight_grad = -1;
  for (size_t i = 1; i < rows.size(); i++) {
    ASSERT_EQ(rows[i].size(), 10u);
    if (rows[i][0] == "euler" && std::stod(rows[i][1]) == 0.002) euler = std::stod(rows[i][6]);
    if (rows[i][0] == "tsit5" && std::stod(rows[i][2]) == 1e-4) tsit_loose = std::stod(rows[i][5]);
    if (rows[i][0] == "tsit5" && std::stod(rows[i][2]) == 1e-7) {
      EXPECT_EQ(rows[i][9], "ok");
      tsit_tight = std::stod(rows[i][5]);
      tsit_tight_grad = std::stod(rows[i][6]);
    }
  }
  ASSERT_GT(euler, 0);
  ASSERT_GT(tsit_tight_grad, 0);
  EXPECT_LT(tsit_tight_grad, euler / 10);
  EXPECT_LT(tsit_tight, tsit_loose / 10);

  // the sphere (Fig. 3): Euler's gradient is the exact derivative of its own discrete map, yet
  // far from the reference; the adaptive pair's is close to the reference
  const auto prim = ReadCsv(dir_ + "/diffmjx_toss_primitives.csv");
  ASSERT_EQ(prim.size(), 3u);
  ASSERT_EQ(prim[1][1], "euler");
  ASSERT_EQ(prim[2][1], "tsit5");
  EXPECT_LT(std::stod(prim[1][4]), 1e-5) << "Euler against its own differences";
  EXPECT_LT(std::stod(prim[2][3]), std::stod(prim[1][3]) / 10) << "against the reference";
}

TEST_F(BenchSuiteTest, BadInputIsNamed) {
#ifdef CK_BENCH
  ProcessResult r = RunProcess({kBench, "dojo"});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("unknown command 'dojo'; allowed: all, dojo-drop"), std::string::npos)
      << r.err;
  r = RunProcess({kBench, "all", "--solvers", "mujoco,newton"});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("unknown solver 'newton'"), std::string::npos) << r.err;
  r = RunProcess({kBench, "all", "--fast"});
  EXPECT_NE(r.err.find("unknown option '--fast'"), std::string::npos) << r.err;
  r = RunProcess({kBench, "comfree-slopes", "--steps", "0"});
  EXPECT_EQ(r.status, 2);
  EXPECT_EQ(r.err, "ck-bench: --steps takes 1 or more steps, got '0'\n");
  r = RunProcess({kBench, "comfree-slopes", "--settle", "-1"});
  EXPECT_EQ(r.err, "ck-bench: --settle takes 0 or more steps, got '-1'\n");
  r = RunProcess({kBench, "comfree-slopes", "--budget", "soon"});
  EXPECT_EQ(r.err, "ck-bench: --budget takes seconds > 0, got 'soon'\n");
  r = RunProcess({kBench, "all", "--out"});
  EXPECT_EQ(r.status, 2);
  EXPECT_EQ(r.err, "ck-bench: --out needs a value\n");
  r = RunProcess({kBench});
  EXPECT_EQ(r.status, 2);
  EXPECT_EQ(r.err.rfind("usage: ck-bench COMMAND [options]", 0), 0u) << r.err;
  for (const char* help : {"--help", "help"}) {
    r = RunProcess({kBench, help});
    EXPECT_EQ(r.status, 0);
    EXPECT_EQ(r.out.rfind("usage: ck-bench COMMAND [options]", 0), 0u) << r.out;
    EXPECT_NE(r.out.find("CK_MENAGERIE"), std::string::npos) << r.out;
  }
#endif
}

}  // namespace
}  // namespace contactkit::test
