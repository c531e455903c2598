// Copyright 2026 The contactkit developers.
//
// Reliability of the C API (issue 13): settings changes that keep memory flat, the model
// fingerprint in every entry point, states MuJoCo resets, NULL arguments, error messages,
// sizes that overflowed int.

#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "plugin/step/handle.h"
#include "support/fixture.h"

namespace contactkit::test {
namespace {

class ReliabilityTest : public MujocoTest {};

// ck_setSettings with derivatives on nested one more derivative workspace per call (+7 MB here)
TEST_F(ReliabilityTest, SettingsChangesKeepMemoryFlat) {
  ModelPtr m = Load(BundledModel("box_on_plane.xml"));
  ASSERT_TRUE(m);
  ckSettings s = Settings(ckSOL_IPM);
  HandlePtr ck = Make(m.get(), &s);
  char err[512];
  long base = 0;
  for (int i = 0; i < 1000; i++) {
    // solver switches and a changed value
    s.solver = i % 3 == 0 ? ckSOL_LCP : ckSOL_IPM;
    s.ipm.kappa_tol = i % 2 ? 1e-9 : 1e-10;
    ASSERT_EQ(0, ck_setSettings(ck.get(), m.get(), &s, err, sizeof(err)))
        << "call " << i << ": " << err;
    if (i == 110) base = ResidentBytes();  // after the allocator settled
    // compared with the same solver active (lcp's workspace is larger than ipm's)
    if (i > 110 && i % 30 == 20) {
      const long grown = ResidentBytes() - base;
      ASSERT_LT(grown, 8l << 20) << "resident memory grew by " << grown << " bytes in " << i - 110
                                 << " settings changes";
    }
  }
  // still one working handle
  DataPtr d(mj_makeData(m.get()));
  const int ndx = 2 * m->nv + m->na;
  std::vector<mjtNum> A(ndx * ndx);
  EXPECT_GE(ck_transitionJac(ck.get(), m.get(), d.get(), A.data(), nullptr, nullptr, nullptr), 0)
      << ck_lastError(ck.get());
}

// the header: m is needed only to change cfd_width once the derivative workspace is made (by
// the first derivative call)
TEST_F(ReliabilityTest, SetSettingsWithoutModelOnDerivativeHandle) {
  ModelPtr m = Load(BundledModel("box_on_plane.xml"));
  ASSERT_TRUE(m);
  HandlePtr ck = Make(m.get());
  ckSettings s = Settings(ckSOL_IPM);
  char err[512] = "stale";
  EXPECT_EQ(0, ck_setSettings(ck.get(), nullptr, &s, err, sizeof(err))) << err;
  EXPECT_STREQ(err, "");
  s.deriv.cfd_width = 0.01;  // no workspace yet: kept for the one the first call makes
  EXPECT_EQ(0, ck_setSettings(ck.get(), nullptr, &s, err, sizeof(err))) << err;
  DataPtr d(mj_makeData(m.get()));
  const int ndx = 2 * m->nv + m->na;
  std::vector<mjtNum> A(ndx * ndx);
  EXPECT_GE(ck_transitionJac(ck.get(), m.get(), d.get(), A.data(), nullptr, nullptr, nullptr), 0)
      << ck_lastError(ck.get());
  s.deriv.cfd_width = 0.02;  // contacts from distance copy the model
  EXPECT_EQ(-1, ck_setSettings(ck.get(), nullptr, &s, err, sizeof(err)));
  EXPECT_NE(std::string(err).find("cfd_width"), std::string::npos) << err;
  EXPECT_EQ(0, ck_setSettings(ck.get(), m.get(), &s, err, sizeof(err))) << err;
}

// two models with the same nq, nv, na, nu and nbody but another structure
const char* kHinge = R"(
<mujoco>
  <worldbody>
    <geom type="plane" size="1 1 0.1"/>
    <body pos="0 0 0.5">
      <joint name="j" type="hinge" axis="0 1 0"/>
      <geom type="capsule" size="0.05" fromto="0 0 0 0.3 0 0"/>
    </body>
  </worldbody>
  <actuator><motor joint="j"/></actuator>
</mujoco>)";
const char* kSlide = R"(
<mujoco>
  <worldbody>
    <geom type="plane" size="1 1 0.1"/>
    <body pos="0 0 0.5">
      <joint name="j" type="slide" axis="0 0 1" limited="true" range="-1 1"/>
      <geom type="box" size="0.1 0.1 0.1"/>
      <geom type="sphere" size="0.1" pos="0.2 0 0"/>
      <site name="s"/>
    </body>
  </worldbody>
  <actuator><motor joint="j"/></actuator>
  <sensor><accelerometer site="s"/><jointpos joint="j"/></sensor>
</mujoco>)";

bool Mentions(const char* text, const char* what) {
  return std::string(text).find(what) != std::string::npos;
}

TEST_F(ReliabilityTest, LookAlikeModelIsRefusedEverywhere) {
  ModelPtr a = LoadString(kHinge), b = LoadString(kSlide);
  ASSERT_TRUE(a && b);
  ASSERT_EQ(a->nq, b->nq);
  ASSERT_EQ(a->nv, b->nv);
  ASSERT_EQ(a->na, b->na);
  ASSERT_EQ(a->nu, b->nu);
  ASSERT_EQ(a->nbody, b->nbody);
  for (int solver : {ckSOL_MUJOCO, ckSOL_IPM}) {
    ckSettings s = Settings(solver);
    HandlePtr ck = Make(a.get(), &s);
    EXPECT_EQ(1, ck_sameModel(ck.get(), a.get()));
    EXPECT_EQ(0, ck_sameModel(ck.get(), b.get()));
    EXPECT_EQ(0, ck_sameModel(ck.get(), nullptr));
    EXPECT_EQ(0, ck_sameModel(nullptr, a.get()));
    DataPtr d(mj_makeData(b.get()));
    d->ctrl[0] = 0.5;
    std::vector<mjtNum> qpos(d->qpos, d->qpos + b->nq);

    ck_step(ck.get(), b.get(), d.get());
    EXPECT_TRUE(Mentions(ck_lastError(ck.get()), "different model")) << ck_lastError(ck.get());
    EXPECT_EQ(1, TakeWarnings("different model"));
    ck_forward(ck.get(), b.get(), d.get());
    EXPECT_TRUE(Mentions(ck_lastError(ck.get()), "ck_forward")) << ck_lastError(ck.get());
    EXPECT_EQ(d->time, 0);
    EXPECT_EQ(qpos, std::vector<mjtNum>(d->qpos, d->qpos + b->nq));

    const int ndx = 2 * b->nv + b->na;
    std::vector<mjtNum> A(ndx * ndx), B(ndx * b->nu), C(b->nsensordata * ndx), g(ndx);
    std::vector<mjtNum> dx(ndx, 1.0);
    EXPECT_EQ(-1,
              ck_transitionJac(ck.get(), b.get(), d.get(), A.data(), B.data(), C.data(), nullptr));
    EXPECT_TRUE(Mentions(ck_lastError(ck.get()), "different model")) << ck_lastError(ck.get());
    EXPECT_EQ(-1,
              ck_transitionVJP(ck.get(), b.get(), d.get(), dx.data(), nullptr, g.data(), nullptr));
    EXPECT_TRUE(Mentions(ck_lastError(ck.get()), "ck_transitionVJP")) << ck_lastError(ck.get());
    EXPECT_EQ(-1, ck_transitionFD(ck.get(), b.get(), d.get(), 1e-6, 0, A.data(), nullptr, C.data(),
                                  nullptr));
    EXPECT_TRUE(Mentions(ck_lastError(ck.get()), "ck_transitionFD")) << ck_lastError(ck.get());
    char err[512] = "";
    EXPECT_EQ(-1, ck_setSettings(ck.get(), b.get(), &s, err, sizeof(err)));
    EXPECT_TRUE(Mentions(err, "different model")) << err;

    // the right model still works, and clears the message
    DataPtr da(mj_makeData(a.get()));
    ck_step(ck.get(), a.get(), da.get());
    EXPECT_GT(da->time, 0);
    EXPECT_STREQ(ck_lastError(ck.get()), "");
  }
}

// the fingerprint sees structure beyond the sizes: limits and friction loss add rows
TEST_F(ReliabilityTest, FingerprintSeesStructure) {
  ModelPtr a = LoadString(kHinge), b = LoadString(kHinge);
  ASSERT_TRUE(a && b);
  EXPECT_EQ(ModelFingerprint(a.get()), ModelFingerprint(b.get()));
  b->body_mass[1] *= 2;  // a parameter: the workspace does not depend on it
  EXPECT_EQ(ModelFingerprint(a.get()), ModelFingerprint(b.get()));
  b->jnt_limited[0] = 1;
  EXPECT_NE(ModelFingerprint(a.get()), ModelFingerprint(b.get()));
  b->jnt_limited[0] = 0;
  b->dof_frictionloss[0] = 1;
  EXPECT_NE(ModelFingerprint(a.get()), ModelFingerprint(b.get()));
}

// implicit integrator and a NaN velocity: the finite differences stepped a scratch mjData that
// mj_checkVel had reset while skipping the position stage, so MuJoCo factored M - h D with M = 0
// and mju_error exited the process
TEST_F(ReliabilityTest, BadStateIsReportedNotFatal) {
  ModelPtr m = Load(BundledModel("stacked_primitives.xml"));
  ASSERT_TRUE(m);
  m->opt.integrator = mjINT_IMPLICIT;
  m->opt.noslip_iterations = 3;
  HandlePtr ck = Make(m.get());
  DataPtr d(mj_makeData(m.get()));
  d->qvel[0] = NAN;
  const int ndx = 2 * m->nv + m->na;
  std::vector<mjtNum> A(ndx * ndx, 7.0), g(ndx), dx(ndx, 1.0);
  EXPECT_EQ(-2, ck_transitionJac(ck.get(), m.get(), d.get(), A.data(), nullptr, nullptr, nullptr));
  EXPECT_TRUE(Mentions(ck_lastError(ck.get()), "qvel[0]")) << ck_lastError(ck.get());
  EXPECT_EQ(A[0], 7.0);  // nothing written
  EXPECT_EQ(-2, ck_transitionFD(ck.get(), m.get(), d.get(), 1e-6, 0, A.data(), nullptr, nullptr,
                                nullptr));
  EXPECT_EQ(-2,
            ck_transitionVJP(ck.get(), m.get(), d.get(), dx.data(), nullptr, g.data(), nullptr));
  d->qvel[0] = 0;
  d->qpos[3] = 1e11;
  EXPECT_EQ(-2, ck_transitionJac(ck.get(), m.get(), d.get(), A.data(), nullptr, nullptr, nullptr));
  EXPECT_TRUE(Mentions(ck_lastError(ck.get()), "qpos[3]")) << ck_lastError(ck.get());
  EXPECT_EQ(0, TakeWarnings(""));  // refused before MuJoCo saw the state
}

// the root cause on its own: a step that skips the position stage from a state mj_checkVel
// resets recomputes the stages instead of factoring a cleared mass matrix
TEST_F(ReliabilityTest, SkippedStepAfterResetIsComplete) {
  ModelPtr m = Load(BundledModel("stacked_primitives.xml"));
  ASSERT_TRUE(m);
  m->opt.integrator = mjINT_IMPLICIT;
  HandlePtr ck = Make(m.get());
  DataPtr d(mj_makeData(m.get()));
  ck_forward(ck.get(), m.get(), d.get());
  d->qvel[0] = NAN;
  StepSkip(ck.get(), m.get(), d.get(), mjSTAGE_POS, 0);
  EXPECT_EQ(1, TakeWarnings("QVEL"));
  for (int i = 0; i < m->nq; i++) EXPECT_TRUE(std::isfinite(d->qpos[i])) << i;
}

// a hinge whose actuator feeds its velocity back (force = v, qDeriv = 1) with M = h = 0.01, so
// that the implicit integrator's M - h qDeriv is 0: MuJoCo's factorization reaches mju_error,
// which exits the process (found by fuzz_sim through the finite differences of a VJP, which step
// states nudged from the caller's). The derivative's steps are refused instead and every entry
// point returns -2 with a message; under Euler the same model steps and has its Jacobian
TEST_F(ReliabilityTest, SingularImplicitMatrixIsRefusedNotFatal) {
  // (loaded under Euler: MuJoCo 2.2.2's compiler steps the model and would stop there)
  ModelPtr m = LoadString(R"(<mujoco><option timestep="0.01"/>
    <worldbody><body><joint name="hinge" axis="0 0 1" damping="0"/>
      <inertial pos="0 0 0" mass="1" diaginertia="0.01 0.01 0.01"/></body></worldbody>
    <actuator><general joint="hinge" biastype="affine" biasprm="0 0 1"/></actuator>
    </mujoco>)");
  ASSERT_TRUE(m);
  for (int solver : {ckSOL_MUJOCO, ckSOL_LCP}) {
    ckSettings s = Settings(solver);
    HandlePtr ck = Make(m.get(), &s);
    DataPtr d(mj_makeData(m.get()));
    d->qvel[0] = 0.5;
    const int ndx = 2 * m->nv + m->na;
    std::vector<mjtNum> A(ndx * ndx), B(ndx * m->nu), g(ndx), dx(ndx, 1.0);
    m->opt.integrator = mjINT_IMPLICIT;
    EXPECT_EQ(-2,
              ck_transitionJac(ck.get(), m.get(), d.get(), A.data(), B.data(), nullptr, nullptr));
    EXPECT_TRUE(Mentions(ck_lastError(ck.get()), "M - h qDeriv")) << ck_lastError(ck.get());
    EXPECT_EQ(-2,
              ck_transitionVJP(ck.get(), m.get(), d.get(), dx.data(), nullptr, g.data(), nullptr));
    EXPECT_EQ(-2, ck_transitionFD(ck.get(), m.get(), d.get(), 1e-6, 1, A.data(), nullptr, nullptr,
                                  nullptr));
    EXPECT_EQ(d->time, 0);  // the caller's state untouched
    EXPECT_EQ(d->qvel[0], 0.5);
    // Euler: the step and its Jacobian (dv+/dv = 1 + h M^-1 = 2)
    m->opt.integrator = mjINT_EULER;
    EXPECT_EQ(0, ck_transitionJac(ck.get(), m.get(), d.get(), A.data(), B.data(), nullptr, nullptr))
        << ck_lastError(ck.get());
    EXPECT_NEAR(A[3], 2, 1e-9);
  }
}

// a NaN control: a distinct return instead of 1 with values from a state MuJoCo reset
TEST_F(ReliabilityTest, NanControlIsReported) {
  ModelPtr m = Load(BundledModel("hopper.xml"));
  ASSERT_TRUE(m);
  m->opt.integrator = mjINT_IMPLICIT;
  m->opt.timestep = 1;
  m->opt.noslip_iterations = 3;
  ckSettings s = Settings(ckSOL_IPM);
  HandlePtr ck = Make(m.get(), &s);
  DataPtr d(mj_makeData(m.get()));
  d->ctrl[1] = NAN;
  const int ndx = 2 * m->nv + m->na;
  std::vector<mjtNum> A(ndx * ndx), B(ndx * m->nu);
  EXPECT_EQ(-2, ck_transitionJac(ck.get(), m.get(), d.get(), A.data(), B.data(), nullptr, nullptr));
  EXPECT_TRUE(Mentions(ck_lastError(ck.get()), "ctrl[1]")) << ck_lastError(ck.get());
}

TEST_F(ReliabilityTest, TransitionSaysWhy) {
  ModelPtr m = Load(BundledModel("box_on_plane.xml"));
  ASSERT_TRUE(m);
  ckSettings s = Settings(ckSOL_IPM);
  s.deriv.enabled = 0;
  HandlePtr ck = Make(m.get(), &s);
  DataPtr d(mj_makeData(m.get()));
  const int ndx = 2 * m->nv + m->na;
  std::vector<mjtNum> A(ndx * ndx);
  EXPECT_EQ(-1, ck_transitionJac(ck.get(), m.get(), d.get(), A.data(), nullptr, nullptr, nullptr));
  EXPECT_TRUE(Mentions(ck_lastError(ck.get()), "derivatives")) << ck_lastError(ck.get());
  EXPECT_EQ(-1, ck_transitionJac(ck.get(), m.get(), nullptr, A.data(), nullptr, nullptr, nullptr));
  EXPECT_TRUE(Mentions(ck_lastError(ck.get()), "data is NULL")) << ck_lastError(ck.get());
  s.deriv.enabled = 1;
  ASSERT_EQ(0, ck_setSettings(ck.get(), m.get(), &s, nullptr, 0));
  EXPECT_EQ(-1,
            ck_transitionFD(ck.get(), m.get(), d.get(), 0, 0, A.data(), nullptr, nullptr, nullptr));
  EXPECT_TRUE(Mentions(ck_lastError(ck.get()), "eps")) << ck_lastError(ck.get());
  EXPECT_EQ(0, ck_transitionJac(ck.get(), m.get(), d.get(), A.data(), nullptr, nullptr, nullptr));
  EXPECT_STREQ(ck_lastError(ck.get()), "");
  EXPECT_EQ(ckFALLBACK_NONE, ck_lastFallback(ck.get()));
  // noslip: finite differences, and why (as a code and in words)
  m->opt.noslip_iterations = 2;
  EXPECT_EQ(1, ck_transitionJac(ck.get(), m.get(), d.get(), A.data(), nullptr, nullptr, nullptr));
  EXPECT_TRUE(Mentions(ck_lastError(ck.get()), "noslip")) << ck_lastError(ck.get());
  EXPECT_EQ(ckFALLBACK_NOSLIP, ck_lastFallback(ck.get()));
  EXPECT_TRUE(Mentions(ck_lastError(ck.get()), ck_fallbackText(ckFALLBACK_NOSLIP)));
  // a refused call clears it
  EXPECT_EQ(-1, ck_transitionJac(ck.get(), m.get(), nullptr, A.data(), nullptr, nullptr, nullptr));
  EXPECT_EQ(ckFALLBACK_NONE, ck_lastFallback(ck.get()));
}

TEST_F(ReliabilityTest, FallbackTextCoversEveryCode) {
  EXPECT_STREQ("", ck_fallbackText(ckFALLBACK_NONE));
  for (int i = 1; i < ckNFALLBACK; i++) EXPECT_GT(std::strlen(ck_fallbackText(i)), 0u) << i;
  EXPECT_EQ(nullptr, ck_fallbackText(ckNFALLBACK));
  EXPECT_EQ(nullptr, ck_fallbackText(-1));
  EXPECT_EQ(ckFALLBACK_NONE, ck_lastFallback(nullptr));
}

TEST_F(ReliabilityTest, LoadXMLStringNamesTheString) {
  char err[1000];
  const char* xml =
      "<mujoco>\n  <worldbody>\n    <geom type=\"sphere\" size=\"x\"/>\n"
      "  </worldbody>\n</mujoco>\n";
  EXPECT_EQ(nullptr, ck_loadXMLString(xml, err, sizeof(err)));
  EXPECT_TRUE(Mentions(err, "<xml string>")) << err;
  EXPECT_FALSE(Mentions(err, "contactkit_")) << err;
  const char* tag =
      "<mujoco>\n<extension>\n<plugin plugin=\"contactkit.solver\">\n<instance name=\"c\">\n"
      "<config key=\"kapa_tol\" value=\"1\"/>\n</instance>\n</plugin>\n</extension>\n</mujoco>\n";
  EXPECT_EQ(nullptr, ck_loadXMLString(tag, err, sizeof(err)));
  EXPECT_TRUE(Mentions(err, "<xml string>:5")) << err;
  EXPECT_FALSE(Mentions(err, "contactkit_")) << err;
}

TEST_F(ReliabilityTest, SetSettingClearsTheErrorOnSuccess) {
  ckSettings s;
  ck_defaultSettings(&s);
  char err[256];
  EXPECT_EQ(-1, ck_setSetting(&s, "kappa_tol", "2", err, sizeof(err)));
  EXPECT_STRNE(err, "");
  EXPECT_EQ(0, ck_setSetting(&s, "kappa_tol", "1e-9", err, sizeof(err)));
  EXPECT_STREQ(err, "");
}

// max_island_rows sizes lcp's workspace: a change through ck_setSettings takes effect (it was
// ignored while ck_getSettings reported it)
TEST_F(ReliabilityTest, MaxIslandRowsChangeTakesEffect) {
  if (!ck_solverAvailable(ckSOL_LCP)) GTEST_SKIP() << "no lcp in this build";
  ModelPtr m = Load(BundledModel("stacked_primitives.xml"));
  ASSERT_TRUE(m);
  ckSettings s = Settings(ckSOL_LCP);
  s.deriv.enabled = 0;
  HandlePtr changed = Make(m.get(), &s);
  s.lcp.max_island_rows = 2;
  HandlePtr made = Make(m.get(), &s);
  ASSERT_EQ(0, ck_setSettings(changed.get(), m.get(), &s, nullptr, 0));
  ckSettings got;
  ck_getSettings(changed.get(), &got);
  EXPECT_EQ(got.lcp.max_island_rows, 2);
  DataPtr a(mj_makeData(m.get())), b(mj_makeData(m.get()));
  for (int t = 0; t < 200; t++) {
    ck_step(changed.get(), m.get(), a.get());
    ck_step(made.get(), m.get(), b.get());
  }
  EXPECT_EQ(0, std::memcmp(a->qpos, b->qpos, sizeof(mjtNum) * m->nq));
  TakeWarnings("iteration limit");
}

// 4 * max_pivots overflowed int for max_pivots above 536870911 (inside the allowed range up to
// 1e9; fails before the fix under UBSan, which reports the overflow): the frozen-friction rounds
// were skipped, so 1e9 could solve differently from 1e8
TEST_F(ReliabilityTest, LargeMaxPivotsSolvesAsSmallerOnes) {
  if (!ck_solverAvailable(ckSOL_LCP)) GTEST_SKIP() << "no lcp in this build";
  ModelPtr m = Load(BundledModel("stacked_primitives.xml"));
  ASSERT_TRUE(m);
  ckSettings s = Settings(ckSOL_LCP);
  s.deriv.enabled = 0;
  s.lcp.max_pivots = 100000000;
  HandlePtr small = Make(m.get(), &s);
  s.lcp.max_pivots = 1000000000;
  HandlePtr large = Make(m.get(), &s);
  DataPtr a(mj_makeData(m.get())), b(mj_makeData(m.get()));
  for (int t = 0; t < TestSteps(300); t++) {
    ck_step(small.get(), m.get(), a.get());
    ck_step(large.get(), m.get(), b.get());
  }
  EXPECT_EQ(0, std::memcmp(a->qpos, b->qpos, sizeof(mjtNum) * m->nq));
}

// a model without dofs: dof arrays are NULL (memcpy from NULL aborted ck_make in the sanitizer
// build, where this test fails before the fix)
TEST_F(ReliabilityTest, ModelWithoutDofs) {
  ModelPtr m = LoadString(
      "<mujoco><worldbody><geom type=\"plane\" size=\"1 1 .1\"/>"
      "<body><geom type=\"sphere\" size=\".1\"/></body></worldbody></mujoco>");
  ASSERT_TRUE(m);
  ASSERT_EQ(m->nv, 0);
  for (int solver = 0; solver < ckNSOLVER; solver++) {
    if (!ck_solverAvailable(solver)) continue;
    ckSettings s = Settings(solver);
    HandlePtr ck = Make(m.get(), &s);
    DataPtr d(mj_makeData(m.get()));
    ck_step(ck.get(), m.get(), d.get());
    EXPECT_STREQ(ck_lastError(ck.get()), "");
    EXPECT_EQ(0, ck_transitionJac(ck.get(), m.get(), d.get(), nullptr, nullptr, nullptr, nullptr))
        << ck_lastError(ck.get());
  }
}

// a handle in use by another thread refuses a second user instead of sharing its workspace (the
// flag is set by hand here, as a second thread would find it)
TEST_F(ReliabilityTest, HandleInUseIsRefused) {
  ModelPtr m = Load(BundledModel("box_on_plane.xml"));
  ASSERT_TRUE(m);
  HandlePtr ck = Make(m.get());
  DataPtr d(mj_makeData(m.get()));
  ck->in_use = true;
  ck_step(ck.get(), m.get(), d.get());
  ck_forward(ck.get(), m.get(), d.get());
  EXPECT_EQ(d->time, 0);
  EXPECT_EQ(d->ncon, 0);  // no forward pass either
  const int ndx = 2 * m->nv + m->na;
  std::vector<mjtNum> A(ndx * ndx);
  EXPECT_EQ(-1, ck_transitionJac(ck.get(), m.get(), d.get(), A.data(), nullptr, nullptr, nullptr));
  ckSettings s = Settings(ckSOL_IPM);
  char err[256];
  EXPECT_EQ(-1, ck_setSettings(ck.get(), m.get(), &s, err, sizeof(err)));
  EXPECT_TRUE(Mentions(err, "in use")) << err;
  EXPECT_EQ(4, TakeWarnings("in use by another thread"));
  ck->in_use = false;
  ck_step(ck.get(), m.get(), d.get());
  EXPECT_GT(d->time, 0);
  EXPECT_FALSE(ck->in_use);  // released after the call
}

// one handle stepped by two threads at once (documented misuse): every call either runs alone or
// is refused with a warning, never both at once (this corrupted the workspace before the flag;
// tools/fuzz.sh runs it under ThreadSanitizer, which reports a workspace race if the flag does not
// order the users)
TEST_F(ReliabilityTest, HandleSharedByTwoThreadsRunsOneCallAtATime) {
  ModelPtr m = Load(BundledModel("box_on_plane.xml"));
  ASSERT_TRUE(m);
  for (int solver : {ckSOL_IPM, ckSOL_LCP, ckSOL_COMFREE}) {
    if (!ck_solverAvailable(solver)) continue;
    ckSettings s = Settings(solver);
    s.deriv.enabled = 0;
    HandlePtr ck = Make(m.get(), &s);
    DataPtr a(mj_makeData(m.get())), b(mj_makeData(m.get()));
    const int calls = TestSteps(200);
    // relaxed counters: only the handle's flag may order the two threads' use of its workspace
    std::atomic<int> inside(0), overlap(0);
    auto run = [&](mjData* d) {
      for (int t = 0; t < calls; t++) {
        if (inside.fetch_add(1, std::memory_order_relaxed) > 0) {
          overlap.fetch_add(1, std::memory_order_relaxed);
        }
        ck_step(ck.get(), m.get(), d);
        inside.fetch_sub(1, std::memory_order_relaxed);
      }
    };
    std::thread t1(run, a.get()), t2(run, b.get());
    t1.join();
    t2.join();
    // each call stepped its data or was refused (data untouched) with one warning
    const int stepped = static_cast<int>(std::lround(a->time / m->opt.timestep)) +
                        static_cast<int>(std::lround(b->time / m->opt.timestep));
    const int refused = TakeWarnings("in use by another thread");
    EXPECT_EQ(stepped + refused, 2 * calls) << "solver " << solver;
    EXPECT_LE(refused, overlap.load()) << "a call was refused while no other one ran";
    EXPECT_FALSE(ck->in_use);
    for (const mjData* d : {a.get(), b.get()}) {
      for (int i = 0; i < m->nq; i++) ASSERT_TRUE(std::isfinite(d->qpos[i]));
    }
  }
}

// every public function with each pointer NULL: no crash, the documented error value
TEST_F(ReliabilityTest, NullArguments) {
  ModelPtr m = Load(BundledModel("box_on_plane.xml"));
  ASSERT_TRUE(m);
  HandlePtr ck = Make(m.get());
  DataPtr d(mj_makeData(m.get()));
  ckSettings s = Settings(ckSOL_IPM);
  char err[256], buf[64];
  const int ndx = 2 * m->nv + m->na;
  std::vector<mjtNum> A(ndx * ndx), g(ndx), dx(ndx);

  ck_defaultSettings(nullptr);
  EXPECT_EQ(-1, ck_setSetting(nullptr, "kappa_tol", "1e-9", err, sizeof(err)));
  EXPECT_TRUE(Mentions(err, "NULL")) << err;
  EXPECT_EQ(-1, ck_setSetting(&s, nullptr, "1e-9", err, sizeof(err)));
  EXPECT_EQ(-1, ck_setSetting(&s, "kappa_tol", nullptr, err, sizeof(err)));
  EXPECT_EQ(0, ck_setSetting(&s, "kappa_tol", "1e-9", nullptr, 0));
  EXPECT_EQ(-1, ck_getSetting(nullptr, "kappa_tol", buf, sizeof(buf)));
  EXPECT_EQ(-1, ck_getSetting(&s, nullptr, buf, sizeof(buf)));
  EXPECT_EQ(-1, ck_getSetting(&s, "kappa_tol", nullptr, sizeof(buf)));
  EXPECT_EQ(-1, ck_settingsFromModel(nullptr, &s, err, sizeof(err)));
  EXPECT_TRUE(Mentions(err, "NULL")) << err;
  EXPECT_EQ(-1, ck_settingsFromModel(m.get(), nullptr, err, sizeof(err)));
  EXPECT_EQ(-1, ck_validateSettings(nullptr, err, sizeof(err)));
  EXPECT_EQ(0, ck_validateSettings(&s, nullptr, 0));
  EXPECT_EQ(-1, ck_solverId(nullptr));
  EXPECT_EQ(nullptr, ck_loadXML(nullptr, nullptr, err, sizeof(err)));
  EXPECT_EQ(nullptr, ck_loadXMLString(nullptr, err, sizeof(err)));
  EXPECT_EQ(nullptr, ck_loadXMLString(nullptr, nullptr, 0));
  EXPECT_EQ(nullptr, ck_make(nullptr, &s, err, sizeof(err)));
  ck_free(nullptr);
  EXPECT_EQ(-1, ck_setSettings(nullptr, m.get(), &s, err, sizeof(err)));
  EXPECT_EQ(-1, ck_setSettings(ck.get(), m.get(), nullptr, err, sizeof(err)));
  ck_reset(nullptr);
  ck_getSettings(nullptr, &s);
  ck_getSettings(ck.get(), nullptr);
  EXPECT_EQ(nullptr, ck_stats(nullptr));
  EXPECT_STREQ("", ck_lastError(nullptr));

  ck_forward(nullptr, m.get(), d.get());
  ck_forward(ck.get(), nullptr, d.get());
  EXPECT_TRUE(Mentions(ck_lastError(ck.get()), "model is NULL")) << ck_lastError(ck.get());
  ck_forward(ck.get(), m.get(), nullptr);
  EXPECT_TRUE(Mentions(ck_lastError(ck.get()), "data is NULL")) << ck_lastError(ck.get());
  ck_forwardSkip(nullptr, m.get(), d.get(), 0, 0);
  ck_forwardSkip(ck.get(), nullptr, d.get(), 0, 0);
  ck_forwardSkip(ck.get(), m.get(), nullptr, 0, 0);
  ck_step(nullptr, m.get(), d.get());
  ck_step(ck.get(), nullptr, d.get());
  ck_step(ck.get(), m.get(), nullptr);
  EXPECT_EQ(d->time, 0);

  for (int arg = 0; arg < 3; arg++) {
    ckHandle* h = arg == 0 ? nullptr : ck.get();
    const mjModel* mm = arg == 1 ? nullptr : m.get();
    const mjData* dd = arg == 2 ? nullptr : d.get();
    EXPECT_EQ(-1, ck_transitionJac(h, mm, dd, A.data(), nullptr, nullptr, nullptr)) << arg;
    EXPECT_EQ(-1, ck_transitionVJP(h, mm, dd, dx.data(), nullptr, g.data(), nullptr)) << arg;
    EXPECT_EQ(-1, ck_transitionFD(h, mm, dd, 1e-6, 0, A.data(), nullptr, nullptr, nullptr)) << arg;
  }
  // all optional pointers NULL
  EXPECT_EQ(0, ck_transitionJac(ck.get(), m.get(), d.get(), nullptr, nullptr, nullptr, nullptr));
  EXPECT_EQ(0, ck_transitionVJP(ck.get(), m.get(), d.get(), nullptr, nullptr, nullptr, nullptr));
  EXPECT_EQ(
      0, ck_transitionFD(ck.get(), m.get(), d.get(), 1e-6, 0, nullptr, nullptr, nullptr, nullptr));
}

}  // namespace
}  // namespace contactkit::test
