// Copyright 2026 The contactkit developers.
//
// The derivative API as a caller sees it: d untouched to the last bit, the step sequence
// unchanged by derivative calls in between, no heap allocation after ck_make, the VJP equal to
// the transposed product of the Jacobians, the sensor Jacobians, argument checks.
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "tests/plugin/deriv/deriv_util.h"

namespace contactkit::test {
namespace {

class DerivativeApiTest : public MujocoTest {};

// ck_transitionVJP of a fixed adjoint returns what ck_transitionJac returned (r) and equals
// dx' [A B] of jac, the Jacobians at the same state (1e-10)
void ExpectVjpIsTransposedJacobians(ckHandle* ck, const mjModel* m, const mjData* d,
                                    const Jacobians& jac, int r, const std::string& what) {
  const int ndx = 2 * m->nv + m->na, nu = m->nu;
  std::vector<double> dx(ndx), gx(ndx), gu(nu);
  for (int i = 0; i < ndx; i++) dx[i] = std::sin(1.0 + i);
  EXPECT_EQ(r, ck_transitionVJP(ck, m, d, dx.data(), nullptr, gx.data(), gu.data())) << what;
  std::vector<double> ex, eu;
  TransposedProducts(m, jac, dx, {}, &ex, &eu);
  EXPECT_LT(RelativeError(gx, ex), 1e-10) << what;
  EXPECT_LT(RelativeError(gu, eu), 1e-10) << what;
}

// every byte of an mjData: the struct, its buffer and its stack
struct Snapshot {
  std::vector<unsigned char> head, buffer, stack;
  Snapshot(const mjModel* m, const mjData* d)
      : head(reinterpret_cast<const unsigned char*>(d),
             reinterpret_cast<const unsigned char*>(d) + sizeof(mjData)),
        buffer(static_cast<const unsigned char*>(d->buffer),
               static_cast<const unsigned char*>(d->buffer) + d->nbuffer),
        stack(Bytes(d)) {}
  static std::vector<unsigned char> Bytes(const mjData* d) {
#if mjVERSION_HEADER >= 300
    const unsigned char* s = static_cast<const unsigned char*>(d->arena);
    return std::vector<unsigned char>(s, s + d->narena);
#else
    const unsigned char* s = reinterpret_cast<const unsigned char*>(d->stack);
    return std::vector<unsigned char>(s, s + sizeof(mjtNum) * d->nstack);
#endif
  }
  bool operator==(const Snapshot& o) const {
    return head == o.head && buffer == o.buffer && stack == o.stack;
  }
};

std::vector<int> Solvers() {
  std::vector<int> out;
  for (int s = 0; s < ckNSOLVER; s++) {
    if (ck_solverAvailable(s)) out.push_back(s);
  }
  return out;
}

// humanoid in contact with controls and an applied force, every integrator
TEST_F(DerivativeApiTest, LeavesDataAndStepSequenceUntouched) {
  ModelPtr m = Load(MujocoModel("humanoid/humanoid.xml"));
  ASSERT_TRUE(m);
  for (int solver : Solvers()) {
    for (int integrator : {mjINT_EULER, mjINT_IMPLICIT, mjINT_RK4}) {
      // comfree also with contact anchors: the derivatives start from the handle's anchors and
      // must not advance them
      for (int anchor = 0; anchor < (solver == ckSOL_COMFREE ? 2 : 1); anchor++) {
        m->opt.integrator = integrator;
        ckSettings s = Settings(solver);
        s.comfree.anchor = anchor;
        HandlePtr ck = Make(m.get(), &s), reference = Make(m.get(), &s);
        DataPtr d(mj_makeData(m.get())), e(mj_makeData(m.get()));
        for (int t = 0; t < 150; t++) {
          ck_step(ck.get(), m.get(), d.get());
          ck_step(reference.get(), m.get(), e.get());
        }
        Jacobians jac(m.get());
        std::vector<double> dx(2 * m->nv + m->na, 1.0), gx(dx.size()), gu(m->nu);
        for (int t = 0; t < 20; t++) {
          for (int i = 0; i < m->nu; i++) d->ctrl[i] = e->ctrl[i] = 0.2 * std::cos(t + i);
          d->xfrc_applied[6 + 2] = e->xfrc_applied[6 + 2] = 5.0;
          const Snapshot before(m.get(), d.get());
          ck_transitionJac(ck.get(), m.get(), d.get(), jac.A.data(), jac.B.data(), nullptr,
                           nullptr);
          ck_transitionVJP(ck.get(), m.get(), d.get(), dx.data(), nullptr, gx.data(), gu.data());
          if (t == 0) {
            ck_transitionFD(ck.get(), m.get(), d.get(), 1e-6, 1, jac.A.data(), nullptr, nullptr,
                            nullptr);
          }
          ASSERT_TRUE(Snapshot(m.get(), d.get()) == before)
              << ck_solverName(solver) << " integrator " << integrator << " step " << t;
          ck_step(ck.get(), m.get(), d.get());
          ck_step(reference.get(), m.get(), e.get());
        }
        EXPECT_EQ(0, std::memcmp(d->qpos, e->qpos, sizeof(mjtNum) * m->nq))
            << ck_solverName(solver) << " integrator " << integrator;
        EXPECT_EQ(0, std::memcmp(d->qvel, e->qvel, sizeof(mjtNum) * m->nv))
            << ck_solverName(solver) << " integrator " << integrator;
        EXPECT_EQ(0, std::memcmp(ck_stats(ck.get()), ck_stats(reference.get()),
                                 offsetof(ckStats, solve_time)));
      }
    }
  }
}

TEST_F(DerivativeApiTest, JacobianAndVjpDoNotAllocate) {
  if (!AllocationCounter::Available()) GTEST_SKIP() << "malloc is owned by the sanitizer";
  // the patch scene has several islands: ipm's tangent skips those a direction leaves alone
  const std::string patches = BundledModel("contact_patches.xml");
  for (const std::string& path :
       {MujocoModel("humanoid/humanoid.xml"), BundledModel("mechanism.xml"), patches}) {
    ModelPtr m = Load(path);
    ASSERT_TRUE(m);
    for (int solver : Solvers()) {
      for (int integrator : {mjINT_EULER, mjINT_IMPLICIT, mjINT_RK4}) {
        for (int anchor = 0; anchor < (solver == ckSOL_COMFREE ? 2 : 1); anchor++) {
          m->opt.integrator = integrator;
          DataPtr d(mj_makeData(m.get()));
          Settle(m.get(), d.get(), 100);
          ckSettings s = Settings(solver);
          s.comfree.anchor = anchor;
          HandlePtr ck = Make(m.get(), &s);
          for (int t = 0; t < 5; t++) ck_step(ck.get(), m.get(), d.get());  // anchors in place
          if (path == patches && solver == ckSOL_IPM) {
            EXPECT_GT(ck_stats(ck.get())->nisland, 1);
          }
          Jacobians jac(m.get());
          std::vector<double> dx(2 * m->nv + m->na, 1.0), gx(dx.size()), gu(m->nu + 1);
          ck_transitionJac(ck.get(), m.get(), d.get(), jac.A.data(), jac.B.data(), nullptr,
                           nullptr);  // warm (thread pools)
          {
            const ckParam warm{ckPARAM_BODY_MASS, 1, 0};
            std::vector<double> dxdp(dx.size());
            ck_paramJac(ck.get(), m.get(), d.get(), &warm, 1, dxdp.data(), nullptr, nullptr);
          }
          const ckParam params[3] = {
              {ckPARAM_BODY_MASS, 1, 0}, {ckPARAM_GRAVITY, 0, 2}, {ckPARAM_GEOM_FRICTION, 0, 0}};
          std::vector<double> dxdp(3 * dx.size());
          int how[3];
          AllocationCounter counter;
          counter.Start();
          ck_transitionJac(ck.get(), m.get(), d.get(), jac.A.data(), jac.B.data(), nullptr,
                           nullptr);
          ck_transitionVJP(ck.get(), m.get(), d.get(), dx.data(), nullptr, gx.data(), gu.data());
          ck_paramJac(ck.get(), m.get(), d.get(), params, 3, dxdp.data(), nullptr, how);
          const long n = counter.Stop();
          EXPECT_EQ(n, 0) << ck_solverName(solver) << " allocated " << n << " times on " << path
                          << " with integrator " << integrator << " anchor " << anchor;
        }
      }
    }
  }
}

// gx = A' dx + C' ds and gu = B' dx + D' ds within 1e-10 (relative)
TEST_F(DerivativeApiTest, VjpEqualsTransposedJacobians) {
  const std::string xml = R"(
<mujoco>
  <option timestep="0.005"/>
  <worldbody>
    <geom name="floor" type="plane" size="3 3 0.1"/>
    <body name="torso" pos="0 0 0.3">
      <freejoint/>
      <geom type="box" size="0.2 0.1 0.05" mass="2"/>
      <site name="imu"/>
      <body pos="0.2 0 0">
        <joint name="hip" type="hinge" axis="0 1 0" damping="0.1"/>
        <geom type="capsule" fromto="0 0 0 0 0 -0.2" size="0.04" mass="0.5"/>
        <site name="toe" pos="0 0 -0.24" size="0.03"/>
      </body>
    </body>
  </worldbody>
  <actuator>
    <motor name="hipmotor" joint="hip" gear="5"/>
    <general joint="hip" dyntype="filter" dynprm="0.05" gainprm="3"/>
  </actuator>
  <sensor>
    <accelerometer site="imu"/>
    <gyro site="imu"/>
    <jointpos joint="hip"/>
    <touch site="toe"/>
    <actuatorfrc actuator="hipmotor"/>
  </sensor>
</mujoco>)";
  ModelPtr m = LoadString(xml);
  ASSERT_TRUE(m);
  for (int solver : Solvers()) {
    for (int integrator : {mjINT_EULER, mjINT_IMPLICIT, mjINT_RK4}) {
      m->opt.integrator = integrator;
      DataPtr d(mj_makeData(m.get()));
      d->ctrl[0] = 0.3;
      d->ctrl[1] = -0.2;
      Settle(m.get(), d.get(), 200);
      ckSettings s = Settings(solver);
      HandlePtr ck = Make(m.get(), &s);
      const int ndx = 2 * m->nv + m->na, ns = m->nsensordata, nu = m->nu;
      Jacobians jac(m.get());
      const int r = ck_transitionJac(ck.get(), m.get(), d.get(), jac.A.data(), jac.B.data(),
                                     jac.C.data(), jac.D.data());
      std::vector<double> dx(ndx), ds(ns), gx(ndx), gu(nu);
      for (int i = 0; i < ndx; i++) dx[i] = std::sin(1.0 + i);
      for (int i = 0; i < ns; i++) ds[i] = std::cos(2.0 + i);
      EXPECT_EQ(r, ck_transitionVJP(ck.get(), m.get(), d.get(), dx.data(), ds.data(), gx.data(),
                                    gu.data()));
      std::vector<double> ex, eu;
      TransposedProducts(m.get(), jac, dx, ds, &ex, &eu);
      EXPECT_LT(RelativeError(gx, ex), 1e-10) << ck_solverName(solver) << " " << integrator;
      EXPECT_LT(RelativeError(gu, eu), 1e-10) << ck_solverName(solver) << " " << integrator;
    }
  }
}

// the VJP of the state alone (no sensor adjoint: the mujoco solver's reverse mode under Euler)
// equals the transposed Jacobians: free, hinge and ball joints in contact, an activation, with
// and without joint damping (Euler's implicit damping), every solver and integrator
TEST_F(DerivativeApiTest, StateVjpEqualsTransposedJacobians) {
  ModelPtr m = LoadString(R"(
<mujoco>
  <option timestep="0.005"/>
  <worldbody>
    <geom name="floor" type="plane" size="3 3 0.1"/>
    <body name="torso" pos="0 0 0.3">
      <freejoint/>
      <geom type="box" size="0.2 0.1 0.05" mass="2"/>
      <body pos="0.2 0 0">
        <joint name="hip" type="hinge" axis="0 1 0" damping="0.1"/>
        <geom type="capsule" fromto="0 0 0 0 0 -0.2" size="0.04" mass="0.5"/>
      </body>
      <body pos="-0.2 0 0">
        <joint name="shoulder" type="ball" damping="0.05"/>
        <geom type="capsule" fromto="0 0 0 -0.1 0.05 -0.2" size="0.04" mass="0.5"/>
      </body>
    </body>
  </worldbody>
  <actuator>
    <motor name="hipmotor" joint="hip" gear="5"/>
    <general joint="hip" dyntype="filter" dynprm="0.05" gainprm="3"/>
  </actuator>
</mujoco>)");
  ASSERT_TRUE(m);
  const std::vector<double> damping(m->dof_damping, m->dof_damping + m->nv);
  for (int solver : Solvers()) {
    for (int integrator : {mjINT_EULER, mjINT_IMPLICIT, mjINT_RK4}) {
      for (int damped = 0; damped < 2; damped++) {
        m->opt.integrator = integrator;
        for (int i = 0; i < m->nv; i++) m->dof_damping[i] = damped ? damping[i] : 0;
        DataPtr d(mj_makeData(m.get()));
        d->ctrl[0] = 0.3;
        d->ctrl[1] = -0.2;
        Settle(m.get(), d.get(), 200);
        ASSERT_GT(d->ncon, 0);
        ckSettings s = Settings(solver);
        HandlePtr ck = Make(m.get(), &s);
        Jacobians jac(m.get());
        const int r = ck_transitionJac(ck.get(), m.get(), d.get(), jac.A.data(), jac.B.data(),
                                       nullptr, nullptr);
        ExpectVjpIsTransposedJacobians(ck.get(), m.get(), d.get(), jac, r,
                                       std::string(ck_solverName(solver)) + " " +
                                           std::to_string(integrator) + " damped " +
                                           std::to_string(damped));
      }
    }
  }
  for (int i = 0; i < m->nv; i++) m->dof_damping[i] = damping[i];
}

// sensors of the step (accelerometer, gyro, joint position, touch, actuator force) against
// centered differences through ck_step; also with acceleration-stage sensors that read no contact
// (the sensor tangent then skips the collision), and with position and velocity sensors only. The
// solver is tightened after the cone is set: on 3.11+ an elliptic cone's solve needs tolerance 0
// to converge, and at 1e-14 it stopped early enough that the differences, not the tangent, were
// 3% off in a few velocity columns of A and C (with the arm's damping)
TEST_F(DerivativeApiTest, SensorJacobiansMatchFiniteDifferences) {
  const std::string head = R"(
<mujoco>
  <option timestep="0.002"/>
  <worldbody>
    <geom name="floor" type="plane" size="3 3 0.1"/>
    <body name="box" pos="0 0 0.1">
      <freejoint/>
      <geom type="box" size="0.1 0.1 0.1" mass="1"/>
      <site name="imu" pos="0.05 0 0"/>
      <site name="bottom" pos="0 0 -0.1" size="0.15 0.15 0.02" type="box"/>
      <body pos="0 0 0.1">
        <joint name="arm" type="hinge" axis="0 1 0" damping="0.05"/>
        <geom type="capsule" fromto="0 0 0 0.2 0 0" size="0.02" mass="0.2"/>
      </body>
    </body>
  </worldbody>
  <actuator>
    <motor name="armmotor" joint="arm" gear="2"/>
  </actuator>
  <sensor>)";
  const char* sensors[] = {
      R"(<accelerometer site="imu"/> <gyro site="imu"/> <velocimeter site="imu"/>
         <jointpos joint="arm"/> <touch site="bottom"/> <framepos objtype="site" objname="imu"/>
         <actuatorfrc actuator="armmotor"/>)",
      R"(<accelerometer site="imu"/> <framelinacc objtype="site" objname="imu"/>
         <frameangacc objtype="body" objname="box"/> <actuatorfrc actuator="armmotor"/>
         <jointvel joint="arm"/>)",
      R"(<jointpos joint="arm"/> <jointvel joint="arm"/> <gyro site="imu"/>
         <framepos objtype="site" objname="imu"/>)"};
  for (const char* block : sensors) {
    ModelPtr m = LoadString(head + block + "</sensor></mujoco>");
    ASSERT_TRUE(m);
    m->opt.cone = mjCONE_ELLIPTIC;
    Tighten(m.get());
    DataPtr d(mj_makeData(m.get()));
    d->ctrl[0] = 0.1;
    Settle(m.get(), d.get(), 300);
    d->qvel[0] = 0.4;
    ASSERT_GT(d->ncon, 0);
    ckSettings s = Settings(ckSOL_MUJOCO);
    HandlePtr ck = Make(m.get(), &s);
    Jacobians jac(m.get()), fd(m.get());
    ASSERT_EQ(0, ck_transitionJac(ck.get(), m.get(), d.get(), jac.A.data(), nullptr, jac.C.data(),
                                  jac.D.data()));
    ASSERT_EQ(0, ck_transitionFD(ck.get(), m.get(), d.get(), 1e-6, 1, fd.A.data(), nullptr,
                                 fd.C.data(), fd.D.data()));
    const int ndx = 2 * m->nv + m->na;
    EXPECT_LT(RelativeError(jac.A, fd.A), 1e-5) << block << WorstEntries(m.get(), jac.A, fd.A, ndx);
    EXPECT_LT(RelativeError(jac.C, fd.C), 1e-5) << block << WorstEntries(m.get(), jac.C, fd.C, ndx);
    EXPECT_LT(RelativeError(jac.D, fd.D), 1e-5)
        << block << WorstEntries(m.get(), jac.D, fd.D, m->nu);
  }
}

// the state VJP on a scene of several islands (a box on its face, a torso whose hinge has a
// limit and dof friction, a ball with torsional and rolling friction, an arm on its joint limit
// away from contact) equals the transposed Jacobians: the solvers' reverse mode (comfree, lcp,
// ipm) on pyramidal and elliptic cones, under Euler with and without damping and implicit, with
// contacts from distance, comfree with anchors; the box pressed into the floor and sliding (lcp:
// rank deficient, with a position correction)
TEST_F(DerivativeApiTest, StateVjpEqualsTransposedJacobiansOnIslands) {
  ModelPtr m = LoadString(R"(
<mujoco>
  <option timestep="0.005"/>
  <worldbody>
    <geom name="floor" type="plane" size="5 5 0.1"/>
    <body name="box" pos="0 0 0.05">
      <freejoint/>
      <geom type="box" size="0.1 0.1 0.05" mass="1"/>
    </body>
    <body name="torso" pos="1 0 0.3">
      <freejoint/>
      <geom type="box" size="0.2 0.1 0.05" mass="2"/>
      <body pos="0.2 0 0">
        <joint name="hip" type="hinge" axis="0 1 0" damping="0.1" limited="true" range="-10 10"
               frictionloss="0.05"/>
        <geom type="capsule" fromto="0 0 0 0.1 0 -0.2" size="0.04" mass="0.5"/>
      </body>
    </body>
    <body name="ball" pos="-1 0 0.1">
      <freejoint/>
      <geom type="sphere" size="0.1" condim="6" mass="0.5"/>
    </body>
    <body name="arm" pos="0 2 1">
      <joint name="swing" type="hinge" axis="0 1 0" limited="true" range="-30 60"
             frictionloss="0.5" damping="0.05"/>
      <geom type="capsule" fromto="0 0 0 0.5 0 0" size="0.025" mass="1" contype="0"
            conaffinity="0"/>
      <geom type="sphere" pos="0.5 0 0" size="0.03" mass="0.1"/>
    </body>
    <geom type="box" pos="0.25 2 0.502" size="0.05 0.05 0.03"/>
  </worldbody>
  <actuator>
    <motor name="hipmotor" joint="hip" gear="5"/>
    <general joint="hip" dyntype="filter" dynprm="0.05" gainprm="3"/>
  </actuator>
</mujoco>)");
  ASSERT_TRUE(m);
  const std::vector<double> damping(m->dof_damping, m->dof_damping + m->nv);
  for (int solver : Solvers()) {
    for (int cone : {mjCONE_PYRAMIDAL, mjCONE_ELLIPTIC}) {
      // variants: Euler, Euler with damping, implicit, Euler with damping and contacts from
      // distance (cfd_width), and for comfree with contact anchors
      for (int variant = 0; variant < (solver == ckSOL_COMFREE ? 5 : 4); variant++) {
        const int integrator = variant == 2 ? mjINT_IMPLICIT : mjINT_EULER;
        const bool damped = variant != 0, cfd = variant == 3, anchor = variant == 4;
        m->opt.cone = cone;
        m->opt.integrator = integrator;
        for (int i = 0; i < m->nv; i++) m->dof_damping[i] = damped ? damping[i] : 0;
        DataPtr d(mj_makeData(m.get()));
        d->ctrl[0] = 0.3;
        d->ctrl[1] = -0.2;
        Settle(m.get(), d.get(), 200);
        d->qvel[0] = 0.2;  // the box slides
        int limits = 0;
        for (int i = 0; i < d->nefc; i++) limits += d->efc_type[i] == mjCNSTR_LIMIT_JOINT;
        ASSERT_GT(limits, 0);
        ckSettings s = Settings(solver);
        s.comfree.anchor = anchor;
        s.deriv.cfd_width = cfd ? 0.02 : 0;
        HandlePtr ck = Make(m.get(), &s);
        for (int t = 0; t < (anchor ? 5 : 1); t++) {
          ck_step(ck.get(), m.get(), d.get());  // (its islands in the statistics, the anchors)
        }
        d->qpos[2] -= 2e-3;  // the box pressed into the floor
        Jacobians jac(m.get());
        const int r = ck_transitionJac(ck.get(), m.get(), d.get(), jac.A.data(), jac.B.data(),
                                       nullptr, nullptr);
        EXPECT_EQ(r, 0) << ck_solverName(solver);
        if (solver == ckSOL_IPM) {
          EXPECT_GT(ck_stats(ck.get())->nisland, 2);
        }
        ExpectVjpIsTransposedJacobians(
            ck.get(), m.get(), d.get(), jac, r,
            std::string(ck_solverName(solver)) + " cone " + std::to_string(cone) + " integrator " +
                std::to_string(integrator) + " variant " + std::to_string(variant));
      }
    }
  }
  for (int i = 0; i < m->nv; i++) m->dof_damping[i] = damping[i];
}

TEST_F(DerivativeApiTest, RejectsBadArguments) {
  ModelPtr m = Load(BundledModel("box_on_plane.xml"));
  ModelPtr other = Load(MujocoModel("humanoid/humanoid.xml"));
  ASSERT_TRUE(m && other);
  DataPtr d(mj_makeData(m.get()));
  HandlePtr ck = Make(m.get());
  Jacobians jac(m.get());
  EXPECT_EQ(-1,
            ck_transitionJac(nullptr, m.get(), d.get(), jac.A.data(), nullptr, nullptr, nullptr));
  EXPECT_EQ(-1, ck_transitionJac(ck.get(), other.get(), d.get(), jac.A.data(), nullptr, nullptr,
                                 nullptr));
  EXPECT_EQ(-1, ck_transitionFD(ck.get(), m.get(), d.get(), 0, 0, jac.A.data(), nullptr, nullptr,
                                nullptr));
  EXPECT_EQ(0, ck_transitionJac(ck.get(), m.get(), d.get(), nullptr, nullptr, nullptr, nullptr));
  EXPECT_EQ(0, ck_transitionVJP(ck.get(), m.get(), d.get(), nullptr, nullptr, nullptr, nullptr));
}

// derivatives = 0: a simulation-only handle steps the same bits and refuses derivatives; turning
// them on with ck_setSettings gives the Jacobian of a handle made with them
TEST_F(DerivativeApiTest, SimulationOnlyHandle) {
  ModelPtr m = Load(MujocoModel("humanoid/humanoid.xml"));
  ASSERT_TRUE(m);
  ckSettings s = Settings(ckSOL_MUJOCO);
  s.deriv.enabled = 0;
  HandlePtr lean = Make(m.get(), &s), full = Make(m.get());
  DataPtr a(mj_makeData(m.get())), b(mj_makeData(m.get()));
  for (int t = 0; t < 100; t++) {
    ck_step(lean.get(), m.get(), a.get());
    ck_step(full.get(), m.get(), b.get());
  }
  ASSERT_EQ(0, std::memcmp(a->qpos, b->qpos, sizeof(mjtNum) * m->nq));
  ASSERT_EQ(0, std::memcmp(a->qvel, b->qvel, sizeof(mjtNum) * m->nv));
  Jacobians ja(m.get()), jb(m.get());
  EXPECT_EQ(-1, ck_transitionJac(lean.get(), m.get(), a.get(), ja.A.data(), ja.B.data(), nullptr,
                                 nullptr));
  EXPECT_EQ(-1, ck_transitionFD(lean.get(), m.get(), a.get(), 1e-6, 0, ja.A.data(), nullptr,
                                nullptr, nullptr));

  char err[200] = "";
  s.deriv.enabled = 1;  // (the workspace is made by the first derivative call: no model needed)
  ASSERT_EQ(0, ck_setSettings(lean.get(), nullptr, &s, err, sizeof(err))) << err;
  ASSERT_EQ(0, ck_transitionJac(lean.get(), m.get(), a.get(), ja.A.data(), ja.B.data(), nullptr,
                                nullptr));
  ASSERT_EQ(0, ck_transitionJac(full.get(), m.get(), b.get(), jb.A.data(), jb.B.data(), nullptr,
                                nullptr));
  EXPECT_EQ(ja.A, jb.A);
  EXPECT_EQ(ja.B, jb.B);

  s.deriv.enabled = 0;  // and off again: the workspace is freed, derivatives refused
  ASSERT_EQ(0, ck_setSettings(lean.get(), m.get(), &s, err, sizeof(err))) << err;
  EXPECT_EQ(-1,
            ck_transitionJac(lean.get(), m.get(), a.get(), ja.A.data(), nullptr, nullptr, nullptr));
}

// the derivative workspace is made by the first derivative call, not by ck_make: a handle that
// only simulates costs the same with derivatives on or off, and only that first call allocates
TEST_F(DerivativeApiTest, DerivativeWorkspaceIsMadeByTheFirstCall) {
  if (!AllocationCounter::Available()) GTEST_SKIP() << "malloc is owned by the sanitizer";
  ModelPtr m = Load(BundledModel("box_on_plane.xml"));
  ASSERT_TRUE(m);
  for (int solver = 0; solver < ckNSOLVER; solver++) {
    ckSettings on = Settings(solver), off = on;
    off.deriv.enabled = 0;
    AllocationCounter counter;
    counter.Start();
    HandlePtr lean = Make(m.get(), &off);
    const long made_off = counter.Stop();
    counter.Start();
    HandlePtr ck = Make(m.get(), &on);
    const long made_on = counter.Stop();
    EXPECT_EQ(made_on, made_off) << "solver " << solver;
    DataPtr d(mj_makeData(m.get()));
    for (int t = 0; t < 20; t++) ck_step(ck.get(), m.get(), d.get());
    Jacobians jac(m.get());
    counter.Start();
    const int first =
        ck_transitionJac(ck.get(), m.get(), d.get(), jac.A.data(), jac.B.data(), nullptr, nullptr);
    const long made_first = counter.Stop();
    counter.Start();
    const int second =
        ck_transitionJac(ck.get(), m.get(), d.get(), jac.A.data(), jac.B.data(), nullptr, nullptr);
    const long made_second = counter.Stop();
    EXPECT_EQ(0, first) << ck_lastError(ck.get());
    EXPECT_EQ(0, second) << ck_lastError(ck.get());
    EXPECT_GT(made_first, 0) << "solver " << solver;
    EXPECT_EQ(made_second, 0) << "solver " << solver;
  }
}

// switching solvers between Jacobians: a Jacobian after the switch is bit-identical to a new
// handle's, with contact and in the air. Comfree with 4 facets hands the write-back its own
// pyramid-edge forces; the next solver must not see them (fuzzing found the contacts-from-distance
// step under RK4 reading them after comfree was freed, and a stage without rows asking the freed
// solver how it reads the mass tangent).
TEST_F(DerivativeApiTest, SolverSwitchKeepsNothingOfTheOldSolver) {
  ModelPtr m = LoadString(R"(<mujoco><option cone="pyramidal"/><worldbody>
      <geom type="plane" size="2 2 .1"/>
      <body pos="0 0 .12"><freejoint/><geom type="box" size=".1 .1 .1"/></body>
      </worldbody></mujoco>)");
  ASSERT_TRUE(m);
  for (int integrator : {mjINT_EULER, mjINT_RK4}) {
    m->opt.integrator = integrator;
    ckSettings s = Settings(ckSOL_COMFREE);
    s.comfree.facets = 4;
    s.deriv.cfd_width = 0.1;
    HandlePtr ck = Make(m.get(), &s);
    DataPtr d(mj_makeData(m.get())), air(mj_makeData(m.get()));
    mj_forward(m.get(), d.get());
    air->qpos[2] = 1;  // (no rows)
    mj_forward(m.get(), air.get());
    Jacobians before(m.get()), after(m.get()), fresh(m.get());
    ASSERT_EQ(0, ck_transitionJac(ck.get(), m.get(), d.get(), before.A.data(), before.B.data(),
                                  nullptr, nullptr));
    for (int solver : Solvers()) {
      if (solver == ckSOL_COMFREE) continue;
      ckSettings next = Settings(solver);
      next.deriv.cfd_width = s.deriv.cfd_width;
      char err[200] = "";
      ASSERT_EQ(0, ck_setSettings(ck.get(), m.get(), &next, err, sizeof(err))) << err;
      HandlePtr other = Make(m.get(), &next);
      ASSERT_EQ(0, ck_transitionJac(ck.get(), m.get(), d.get(), after.A.data(), after.B.data(),
                                    nullptr, nullptr));
      ASSERT_EQ(0, ck_transitionJac(other.get(), m.get(), d.get(), fresh.A.data(), fresh.B.data(),
                                    nullptr, nullptr));
      EXPECT_EQ(after.A, fresh.A) << "solver " << solver << ", integrator " << integrator;
      EXPECT_EQ(after.B, fresh.B) << "solver " << solver << ", integrator " << integrator;
      // in the air, after a switch away from a solver whose last stage had rows
      ASSERT_EQ(0, ck_setSettings(ck.get(), m.get(), &s, err, sizeof(err))) << err;
      ASSERT_EQ(0, ck_transitionJac(ck.get(), m.get(), d.get(), after.A.data(), after.B.data(),
                                    nullptr, nullptr));
      ASSERT_EQ(0, ck_setSettings(ck.get(), m.get(), &next, err, sizeof(err))) << err;
      ASSERT_EQ(0, ck_transitionJac(ck.get(), m.get(), air.get(), after.A.data(), after.B.data(),
                                    nullptr, nullptr));
      ASSERT_EQ(0, ck_transitionJac(other.get(), m.get(), air.get(), fresh.A.data(), fresh.B.data(),
                                    nullptr, nullptr));
      EXPECT_EQ(after.A, fresh.A) << "in the air, solver " << solver;
      EXPECT_EQ(after.B, fresh.B) << "in the air, solver " << solver;
      ASSERT_EQ(0, ck_setSettings(ck.get(), m.get(), &s, err, sizeof(err))) << err;
      ASSERT_EQ(0, ck_transitionJac(ck.get(), m.get(), d.get(), after.A.data(), after.B.data(),
                                    nullptr, nullptr));
      EXPECT_EQ(after.A, before.A) << "back to comfree from solver " << solver;
    }
  }
}

}  // namespace
}  // namespace contactkit::test
