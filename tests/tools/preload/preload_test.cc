// Copyright 2026 The contactkit developers.
//
// libcontactkit_preload.so in unmodified MuJoCo programs: Debian's mujoco-testspeed runs a bundled
// model with the shim loaded, and the shim's report (CONTACTKIT_REPORT=1) and the program's own
// statistics are compared with MuJoCo's solver. Also: the detector that tells whether a libmujoco
// can be interposed, on libmujoco itself and on two small libraries built for the test.
#include <gtest/gtest.h>

#include <regex>
#include <string>
#include <utility>
#include <vector>

#include "contactkit/contactkit.h"
#include "support/fixture.h"
#include "tests/tools/process.h"
#include "tools/preload/elf_check.h"

namespace contactkit::test {
namespace {

const char kTestspeed[] = "/usr/bin/mujoco-testspeed";
const char kLibmujoco[] = "/usr/lib/x86_64-linux-gnu/libmujoco.so";
#define CK_TEST_MJ2 (mjVERSION_HEADER < 300)

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kAsan = true;
#else
constexpr bool kAsan = false;
#endif

#if CK_TEST_MJ2
// The shim replaces mj_fwdConstraint only in a libmujoco whose internal calls go through the
// dynamic symbol table: Debian's 2.2.2 (the process tests below run its mujoco-testspeed). The
// 3.x wheel binds them inside the library; its test is at the end of this file.
// one "mjData #k: N constraint solves by S, max penetration P m" line of the report
struct DataReport {
  int index = -1;
  long solves = 0;
  std::string solver;
  double max_penetration = -1;
  double final_penetration = -1;
};

std::vector<DataReport> ParseReport(const std::string& err) {
  std::vector<DataReport> out;
  const std::regex re(
      R"(mjData #(\d+): (\d+) constraint solves by (\w+), max penetration ([-+0-9.eE]+) m, )"
      R"(final penetration ([-+0-9.eE]+) m)");
  for (std::sregex_iterator it(err.begin(), err.end(), re), end; it != end; ++it) {
    DataReport r;
    r.index = std::stoi((*it)[1]);
    r.solves = std::stol((*it)[2]);
    r.solver = (*it)[3];
    r.max_penetration = std::stod((*it)[4]);
    r.final_penetration = std::stod((*it)[5]);
    out.push_back(r);
  }
  return out;
}

// the report of the mjData that ran the most solves (testspeed's, not the compiler's)
DataReport Busiest(const std::vector<DataReport>& reports) {
  DataReport best;
  for (const DataReport& r : reports) {
    if (r.solves > best.solves) best = r;
  }
  return best;
}

// a line of testspeed's output ("Contacts per step    : 3.94"), empty if absent
std::string Line(const std::string& out, const std::string& label) {
  const size_t at = out.find(label);
  if (at == std::string::npos) return "";
  return out.substr(at, out.find('\n', at) - at);
}

// the solver the hard-contact tests run: ipm, else another of ours, else none (-1)
int SolverUnderTest() {
  if (ck_solverAvailable(ckSOL_IPM)) return ckSOL_IPM;
  for (int s = 1; s < ckNSOLVER; s++) {
    if (ck_solverAvailable(s)) return s;
  }
  return -1;
}

class PreloadMuJoCo2Test : public ::testing::Test {
 protected:
  void SetUp() override {
#ifndef CK_PRELOAD_LIB
    GTEST_SKIP() << "libcontactkit_preload.so is not built (CK_BUILD_TOOLS=OFF)";
#else
    if (!FileExists(kTestspeed)) {
      GTEST_SKIP() << kTestspeed << " is absent (Debian package libmujoco-samples)";
    }
    preload_ = CK_PRELOAD_LIB;
    if (kAsan) {
#ifdef CK_ASAN_RUNTIME
      // AddressSanitizer's runtime must come first in the preload list
      preload_ = std::string(CK_ASAN_RUNTIME) + ":" + preload_;
#else
      GTEST_SKIP() << "AddressSanitizer build without a known libasan path: the shim cannot be "
                      "preloaded into an uninstrumented program";
#endif
    }
#endif
  }

  // mujoco-testspeed model nstep nthread 0 (no control noise), with the shim if env is given
  ProcessResult Testspeed(const std::string& model, int nstep, int nthread, bool shim,
                          std::vector<std::pair<std::string, std::string>> env = {}) {
    if (shim) {
      env.emplace_back("LD_PRELOAD", preload_);
      env.emplace_back("CONTACTKIT_REPORT", "1");
      if (kAsan) env.emplace_back("ASAN_OPTIONS", "detect_leaks=0");
    }
    ProcessResult r = RunProcess(
        {kTestspeed, model, std::to_string(nstep), std::to_string(nthread), "0"}, env, "testspeed");
    EXPECT_EQ(r.status, 0) << r.out << r.err;
    return r;
  }

  std::string preload_;
};

#endif  // CK_TEST_MJ2

TEST(ElfCheckTest, DebianLibmujocoCallsFwdConstraintThroughThePlt) {
  if (!FileExists(kLibmujoco)) GTEST_SKIP() << kLibmujoco << " is absent";
  std::string err;
  EXPECT_EQ(preload::HasDynamicRelocation(kLibmujoco, "mj_fwdConstraint", &err), 1) << err;
  // its internal callers of mjd_transitionFD's helpers are direct calls: no relocation
  EXPECT_EQ(preload::HasDynamicRelocation(kLibmujoco, "mjd_transitionFD", &err), 0) << err;
}

TEST(ElfCheckTest, SymbolicBindingIsDetected) {
#if defined(CK_FAKE_PLT_LIB) && defined(CK_FAKE_BOUND_LIB)
  std::string err;
  EXPECT_EQ(preload::HasDynamicRelocation(CK_FAKE_PLT_LIB, "mj_fwdConstraint", &err), 1) << err;
  EXPECT_EQ(preload::HasDynamicRelocation(CK_FAKE_BOUND_LIB, "mj_fwdConstraint", &err), 0) << err;
#else
  GTEST_SKIP() << "test libraries not built";
#endif
}

TEST(ElfCheckTest, BadFilesAreReported) {
  std::string err;
  EXPECT_EQ(preload::HasDynamicRelocation("/nonexistent/libx.so", "f", &err), -1);
  EXPECT_NE(err.find("cannot open"), std::string::npos) << err;
  EXPECT_EQ(preload::HasDynamicRelocation(BundledModel("box_on_plane.xml"), "f", &err), -1);
  EXPECT_NE(err.find("not a 64-bit ELF"), std::string::npos) << err;
}

#if CK_TEST_MJ2
// the "mujoco" solver through the shim: every step goes through it and nothing changes
TEST_F(PreloadMuJoCo2Test, MujocoPassThroughChangesNothing) {
  const std::string model = BundledModel("box_on_plane.xml");
  const int nstep = TestSteps(500);
  const ProcessResult plain = Testspeed(model, nstep, 1, false);
  const ProcessResult shim = Testspeed(model, nstep, 1, true, {{"CONTACTKIT_SOLVER", "mujoco"}});
  ASSERT_FALSE(Line(plain.out, "Contacts per step").empty()) << plain.out;
  EXPECT_EQ(Line(plain.out, "Contacts per step"), Line(shim.out, "Contacts per step"));
  EXPECT_EQ(Line(plain.out, "Constraints per step"), Line(shim.out, "Constraints per step"));
  EXPECT_NE(shim.err.find("contactkit preload: active"), std::string::npos) << shim.err;
  const DataReport r = Busiest(ParseReport(shim.err));
  EXPECT_EQ(r.solves, nstep) << shim.err;
  EXPECT_EQ(r.solver, "mujoco");
  EXPECT_GT(r.max_penetration, 1e-4) << "MuJoCo's soft contact penetrates";
}

// one handle per mjData: two threads, two reports with every step of each
TEST_F(PreloadMuJoCo2Test, OneWorkspacePerDataInThreads) {
  const int solver = SolverUnderTest();
  const std::string name = ck_solverName(solver < 0 ? ckSOL_MUJOCO : solver);
  const int nstep = TestSteps(300);
  const ProcessResult shim =
      Testspeed(BundledModel("box_on_plane.xml"), nstep, 2, true, {{"CONTACTKIT_SOLVER", name}});
  int full = 0;
  std::vector<int> indices;
  for (const DataReport& r : ParseReport(shim.err)) {
    if (r.solves == nstep) {
      full++;
      indices.push_back(r.index);
      EXPECT_EQ(r.solver, name);
    }
  }
  EXPECT_EQ(full, 2) << shim.err;
  if (full == 2) {
    EXPECT_NE(indices[0], indices[1]);
  }
}

// the acceptance test: an unmodified sample binary runs hard contact through the shim
TEST_F(PreloadMuJoCo2Test, HardContactDiffersFromMujoco) {
  const int solver = SolverUnderTest();
  if (solver < 0) {
    GTEST_SKIP() << "no contactkit solver besides 'mujoco' is in this build yet (the test runs "
                    "ipm, else any other of ours, once one is merged)";
  }
  const std::string name = ck_solverName(solver);
  const std::string model = BundledModel("box_on_plane.xml");
  const int nstep = TestSteps(500);
  const ProcessResult base = Testspeed(model, nstep, 1, true, {{"CONTACTKIT_SOLVER", "mujoco"}});
  const ProcessResult ours = Testspeed(model, nstep, 1, true, {{"CONTACTKIT_SOLVER", name}});
  const DataReport b = Busiest(ParseReport(base.err)), o = Busiest(ParseReport(ours.err));
  ASSERT_EQ(o.solves, nstep) << ours.err;
  EXPECT_EQ(o.solver, name);
  EXPECT_GT(b.max_penetration, 1e-4) << base.err;
  if (solver == ckSOL_IPM) {
    // hard contact: the impact penetrates only as deep as the one step before the margin-free
    // box's contact is detected, far less than MuJoCo's soft contact; then the box is held at
    // ipm's resting depth exactly
    ckSettings defaults;
    ck_defaultSettings(&defaults);
    EXPECT_LT(o.max_penetration, 0.2 * b.max_penetration) << ours.err;
    EXPECT_NEAR(o.final_penetration, defaults.ipm.rest_depth, 1e-6) << ours.err;
  } else {
    EXPECT_GT(std::fabs(o.max_penetration - b.max_penetration), 0.01 * b.max_penetration)
        << ours.err;
  }
}

// settings from the model's <custom> fields, read by the shim in a program that knows nothing
TEST_F(PreloadMuJoCo2Test, ModelCustomFieldsAreRead) {
  const std::string dir = MakeTempDir("preload_custom");
  std::string xml = ReadFile(BundledModel("box_on_plane.xml"));
  const size_t end = xml.rfind("</mujoco>");
  ASSERT_NE(end, std::string::npos);
  auto write = [&](const std::string& custom) {
    const std::string path = dir + "/box_custom.xml";
    std::string text = xml;
    text.insert(end, custom);
    FILE* f = std::fopen(path.c_str(), "w");
    std::fputs(text.c_str(), f);
    std::fclose(f);
    return path;
  };

  // a bad value in the model is named, and the model runs MuJoCo's solver
  std::string path = write("<custom><text name=\"contactkit:kappa_tol\" data=\"2\"/></custom>");
  ProcessResult r = Testspeed(path, 20, 1, true);
  EXPECT_NE(r.err.find("kappa_tol"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("runs MuJoCo's own solver"), std::string::npos) << r.err;

  const int solver = SolverUnderTest();
  if (solver >= 0) {
    // the model names our solver; the environment can override it
    path = write(std::string("<custom><text name=\"contactkit:solver\" data=\"") +
                 ck_solverName(solver) + "\"/></custom>");
    r = Testspeed(path, 50, 1, true);
    EXPECT_EQ(Busiest(ParseReport(r.err)).solver, ck_solverName(solver)) << r.err;
    r = Testspeed(path, 50, 1, true, {{"CONTACTKIT_SETTINGS", "solver=mujoco"}});
    EXPECT_EQ(Busiest(ParseReport(r.err)).solver, "mujoco") << r.err;
  }
  std::remove(path.c_str());
  rmdir(dir.c_str());
}

TEST_F(PreloadMuJoCo2Test, BadEnvironmentIsNamedAndMujocoRuns) {
  const std::string model = BundledModel("box_on_plane.xml");
  ProcessResult r = Testspeed(model, 20, 1, true, {{"CONTACTKIT_SOLVER", "fast"}});
  EXPECT_NE(r.err.find("CONTACTKIT_SOLVER"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("'fast'"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("mujoco, ipm, comfree, lcp"), std::string::npos) << r.err;
  EXPECT_TRUE(ParseReport(r.err).empty()) << "disabled shim runs nothing of ours";

  r = Testspeed(model, 20, 1, true, {{"CONTACTKIT_SETTINGS", "kappa_tol"}});
  EXPECT_NE(r.err.find("not KEY=VALUE"), std::string::npos) << r.err;
  r = Testspeed(model, 20, 1, true, {{"CONTACTKIT_DERIVATIVES", "exact"}});
  EXPECT_NE(r.err.find("allowed: fd"), std::string::npos) << r.err;
}

#endif  // CK_TEST_MJ2

// The shim in a plain MuJoCo program linked against this build's libmujoco. Where that libmujoco
// calls mj_fwdConstraint through the dynamic linker (Debian's 2.2.2, the 3.3 wheels) the shim runs
// our solver; where it binds the call inside the library (the 3.17 wheel) the shim detects that,
// says so, and MuJoCo runs unchanged. Both outcomes are checked against the ELF detection.
TEST(PreloadTest, ShimInAPlainProgramFollowsTheDetection) {
  std::string err;
  const int interposable = preload::HasDynamicRelocation(CK_LIBMUJOCO, "mj_fwdConstraint", &err);
  ASSERT_GE(interposable, 0) << CK_LIBMUJOCO << ": " << err;
  const std::string model = BundledModel("box_on_plane.xml");
  std::vector<std::pair<std::string, std::string>> env = {{"CONTACTKIT_SOLVER", "ipm"},
                                                          {"CONTACTKIT_REPORT", "1"}};
  std::string preload = CK_PRELOAD_LIB;
#ifdef CK_ASAN_RUNTIME
  preload = std::string(CK_ASAN_RUNTIME) + ":" + preload;
#endif
  env.emplace_back("LD_PRELOAD", preload);
  if (kAsan) env.emplace_back("ASAN_OPTIONS", "detect_leaks=0");
  const ProcessResult plain = RunProcess({CK_MINI_SIM, model, "200"}, {}, "mini_sim");
  const ProcessResult shim = RunProcess({CK_MINI_SIM, model, "200"}, env, "mini_sim");
  ASSERT_EQ(plain.status, 0) << plain.out << plain.err;
  ASSERT_EQ(shim.status, 0) << shim.out << shim.err;
  ASSERT_NE(plain.out.find("steps 200"), std::string::npos) << plain.out;
  if (interposable) {
    EXPECT_NE(shim.err.find("contactkit preload: active"), std::string::npos) << shim.err;
    EXPECT_NE(shim.err.find("200 constraint solves by ipm"), std::string::npos) << shim.err;
    EXPECT_NE(plain.out, shim.out) << "ipm's hard contact moves the box differently";
  } else {
    EXPECT_NE(shim.err.find("binds mj_fwdConstraint internally"), std::string::npos) << shim.err;
    EXPECT_NE(shim.err.find("MuJoCo's own solver runs unchanged"), std::string::npos) << shim.err;
    EXPECT_EQ(plain.out, shim.out);
  }
}

}  // namespace
}  // namespace contactkit::test
