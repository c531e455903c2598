// Copyright 2026 The contactkit developers.
//
// Quality gates that hold for every solver in the build: no heap allocation in a step after
// ck_make, thread safety with one handle per mjData, clear handling of bad state and misuse.
#include <cmath>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "support/fixture.h"

namespace contactkit::test {
namespace {

using QualityTest = MujocoTest;

std::vector<int> AvailableSolvers() {
  std::vector<int> out;
  for (int s = 0; s < ckNSOLVER; s++) {
    if (ck_solverAvailable(s)) out.push_back(s);
  }
  return out;
}

class EverySolver : public MujocoTest, public ::testing::WithParamInterface<int> {};

// a scene with contacts, limits, friction loss and equality constraints in every step
std::string Scene(int which) {
  return which == 0 ? MujocoModel("humanoid/humanoid.xml") : BundledModel("mechanism.xml");
}

TEST_P(EverySolver, StepDoesNotAllocate) {
  if (!AllocationCounter::Available()) GTEST_SKIP() << "malloc is owned by the sanitizer";
  for (int which = 0; which < 2; which++) {
    ModelPtr m = Load(Scene(which));
    ASSERT_TRUE(m);
    for (int integrator : {mjINT_EULER, mjINT_RK4, mjINT_IMPLICIT}) {
      for (int anchor = 0; anchor < (GetParam() == ckSOL_COMFREE ? 2 : 1); anchor++) {
        m->opt.integrator = integrator;
        DataPtr d(mj_makeData(m.get()));
        ckSettings s = Settings(GetParam());
        s.comfree.anchor = anchor;  // comfree: also with contact anchors
        HandlePtr ck = Make(m.get(), &s);
        ASSERT_TRUE(ck);
        for (int t = 0; t < 20; t++) ck_step(ck.get(), m.get(), d.get());  // warm (thread pools)
        AllocationCounter counter;
        counter.Start();
        for (int t = 0; t < 100; t++) ck_step(ck.get(), m.get(), d.get());
        const long n = counter.Stop();
        EXPECT_EQ(n, 0) << ck_solverName(GetParam()) << " allocated " << n
                        << " times in 100 steps on " << Scene(which) << " with integrator "
                        << integrator << " anchor " << anchor;
        EXPECT_GT(ck_stats(ck.get())->ncon + d->nefc, 0);
      }
    }
  }
}

TEST_P(EverySolver, TwoThreadsMatchSequentialRuns) {
  ModelPtr m = Load(MujocoModel("humanoid/humanoid.xml"));
  ASSERT_TRUE(m);
  const int steps = TestSteps(300);
  auto run = [&](mjData* d, ckHandle* ck, double push) {
    for (int t = 0; t < steps; t++) {
      for (int i = 0; i < m->nu; i++) d->ctrl[i] = push * std::sin(0.01 * t + i);
      ck_step(ck, m.get(), d);
    }
  };
  ckSettings s = Settings(GetParam());
  DataPtr a(mj_makeData(m.get())), b(mj_makeData(m.get()));
  DataPtr c(mj_makeData(m.get())), e(mj_makeData(m.get()));
  HandlePtr ha = Make(m.get(), &s), hb = Make(m.get(), &s), hc = Make(m.get(), &s),
            he = Make(m.get(), &s);

  // sequential reference
  run(a.get(), ha.get(), 0.2);
  run(b.get(), hb.get(), -0.3);

  // the same two runs in two threads
  std::thread t1([&] { run(c.get(), hc.get(), 0.2); });
  std::thread t2([&] { run(e.get(), he.get(), -0.3); });
  t1.join();
  t2.join();
  EXPECT_EQ(0, std::memcmp(a->qpos, c->qpos, sizeof(mjtNum) * m->nq));
  EXPECT_EQ(0, std::memcmp(b->qpos, e->qpos, sizeof(mjtNum) * m->nq));
  EXPECT_EQ(0, std::memcmp(a->qvel, c->qvel, sizeof(mjtNum) * m->nv));
  EXPECT_EQ(0, std::memcmp(b->qvel, e->qvel, sizeof(mjtNum) * m->nv));
}

TEST_P(EverySolver, NanVelocityIsResetWithAWarning) {
  ModelPtr m = Load(MujocoModel("humanoid/humanoid.xml"));
  ASSERT_TRUE(m);
  ckSettings s = Settings(GetParam());
  HandlePtr ck = Make(m.get(), &s);
  DataPtr d(mj_makeData(m.get()));
  for (int t = 0; t < 10; t++) ck_step(ck.get(), m.get(), d.get());
  d->qvel[3] = NAN;
  ck_step(ck.get(), m.get(), d.get());
  EXPECT_EQ(TakeWarnings("QVEL"), 1);
  for (int i = 0; i < m->nq; i++) ASSERT_TRUE(std::isfinite(d->qpos[i]));
  for (int i = 0; i < m->nv; i++) ASSERT_TRUE(std::isfinite(d->qvel[i]));
  for (int t = 0; t < 10; t++) ck_step(ck.get(), m.get(), d.get());
  for (int i = 0; i < m->nv; i++) ASSERT_TRUE(std::isfinite(d->qvel[i]));
}

TEST_P(EverySolver, NanControlNeverReachesTheState) {
  ModelPtr m = Load(MujocoModel("humanoid/humanoid.xml"));
  ASSERT_TRUE(m);
  ckSettings s = Settings(GetParam());
  HandlePtr ck = Make(m.get(), &s);
  DataPtr d(mj_makeData(m.get()));
  for (int t = 0; t < 10; t++) ck_step(ck.get(), m.get(), d.get());
  d->ctrl[0] = NAN;
  ck_step(ck.get(), m.get(), d.get());
  // MuJoCo's checks or ours must have caught it; never a NaN state
  for (int i = 0; i < m->nq; i++) ASSERT_TRUE(std::isfinite(d->qpos[i]));
  for (int i = 0; i < m->nv; i++) ASSERT_TRUE(std::isfinite(d->qvel[i]));
  EXPECT_GE(static_cast<int>(warnings().size()), 1);
  warnings().clear();
}

// MuJoCo's sensors, mj_contactForce and the efc arrays see the solver's forces: a resting box's
// touch sensor reads its weight, and qfrc_constraint = efc_J' efc_force for both cone types
TEST_P(EverySolver, SensorsAndEfcArraysSeeTheForces) {
  for (const char* cone : {"pyramidal", "elliptic"}) {
    const std::string xml = std::string(R"(
<mujoco>
  <option timestep="0.002" cone=")") +
                            cone + R"("/>
  <worldbody>
    <geom type="plane" size="2 2 0.1" friction="0.8"/>
    <body name="box" pos="0 0 0.1">
      <freejoint/>
      <geom type="box" size="0.1 0.1 0.1" mass="2" friction="0.8"/>
      <site name="bottom" pos="0 0 -0.1" size="0.11 0.11 0.02" type="box"/>
    </body>
  </worldbody>
  <sensor>
    <touch site="bottom"/>
  </sensor>
</mujoco>)";
    ModelPtr m = LoadString(xml);
    ASSERT_TRUE(m);
    ckSettings s = Settings(GetParam());
    HandlePtr ck = Make(m.get(), &s);
    DataPtr d(mj_makeData(m.get()));
    for (int t = 0; t < 1000; t++) ck_step(ck.get(), m.get(), d.get());
    ck_forward(ck.get(), m.get(), d.get());
    const double weight = 2 * 9.81;
    EXPECT_NEAR(d->sensordata[0], weight, 0.02 * weight) << cone;

    // normal forces from MuJoCo's own decoding sum to the weight
    double normal = 0;
    for (int i = 0; i < d->ncon; i++) {
      mjtNum f[6];
      mj_contactForce(m.get(), d.get(), i, f);
      normal += f[0];
    }
    EXPECT_NEAR(normal, weight, 0.02 * weight) << cone;

    // qfrc_constraint is J' f in MuJoCo's own rows
    std::vector<mjtNum> jtf(m->nv);
    mj_mulJacTVec(m.get(), d.get(), jtf.data(), d->efc_force);
    for (int i = 0; i < m->nv; i++) EXPECT_NEAR(jtf[i], d->qfrc_constraint[i], 1e-8) << cone;
  }
}

INSTANTIATE_TEST_SUITE_P(Solvers, EverySolver, ::testing::ValuesIn(AvailableSolvers()),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return std::string(ck_solverName(info.param));
                         });

// the counter itself sees malloc, new and Eigen-style aligned allocations
TEST(AllocationCounterTest, CountsAllocations) {
  if (!AllocationCounter::Available()) GTEST_SKIP() << "malloc is owned by the sanitizer";
  AllocationCounter counter;
  counter.Start();
  std::vector<double>* v = new std::vector<double>(100);
  void* p = nullptr;
  EXPECT_EQ(posix_memalign(&p, 64, 256), 0);
  const long n = counter.Stop();
  delete v;
  free(p);
  EXPECT_EQ(n, 3);
}

TEST_F(QualityTest, HandleOfAnotherModelIsRefusedWithAWarning) {
  ModelPtr a = Load(MujocoModel("humanoid/humanoid.xml"));
  ModelPtr b = Load(BundledModel("box_on_plane.xml"));
  ASSERT_TRUE(a && b);
  HandlePtr ck = Make(a.get());
  DataPtr d(mj_makeData(b.get()));
  ck_step(ck.get(), b.get(), d.get());
  ck_step(ck.get(), b.get(), d.get());
  EXPECT_EQ(TakeWarnings("different model"), 1);
  EXPECT_EQ(d->time, 0);
}

TEST_F(QualityTest, MakeRejectsBadInput) {
  char err[512];
  EXPECT_EQ(ck_make(nullptr, nullptr, err, sizeof(err)), nullptr);
  EXPECT_NE(std::string(err).find("NULL"), std::string::npos);
  ModelPtr m = Load(MujocoModel("humanoid/humanoid.xml"));
  ckSettings s = Settings(ckSOL_MUJOCO);
  s.ipm.kappa_tol = -1;
  EXPECT_EQ(ck_make(m.get(), &s, err, sizeof(err)), nullptr);
  EXPECT_NE(std::string(err).find("kappa_tol"), std::string::npos) << err;
  s = Settings(ckSOL_MUJOCO);
  s.solver = 17;
  EXPECT_EQ(ck_make(m.get(), &s, err, sizeof(err)), nullptr);
  EXPECT_NE(std::string(err).find("solver"), std::string::npos) << err;
}

}  // namespace
}  // namespace contactkit::test
