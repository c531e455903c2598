// Copyright 2026 The contactkit developers.
//
// The single-stage columns are written and emitted on the span of their nonzero dofs
// (Derivative::column_spans_): on a scene of several trees and islands every solver's Jacobians
// are those of the whole columns bit for bit, under Euler, implicit and lcp's split impulse.
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "plugin/deriv/derivative.h"
#include "plugin/deriv/smooth_tangent.h"
#include "plugin/step/handle.h"
#include "tests/plugin/deriv/deriv_util.h"

namespace contactkit::test {
namespace {

// trees: a box sliding on the floor, an arm (hinge, ball) resting its tip on a second box, a
// ball in the air (no rows), a cart on a slide with a motor; the boxes and the arm are islands
constexpr char kTrees[] = R"(
<mujoco>
  <option timestep="0.005"/>
  <worldbody>
    <geom type="plane" size="5 5 0.1"/>
    <body pos="0 0 0.1"><freejoint/><geom type="box" size="0.1 0.1 0.1"/></body>
    <body pos="1 0 0.4">
      <joint name="shoulder" type="hinge" axis="0 1 0" damping="0.2"/>
      <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.03"/>
      <body pos="0.3 0 0">
        <joint type="ball" damping="0.1"/>
        <geom type="capsule" fromto="0 0 0 0 0 -0.15" size="0.03"/>
      </body>
    </body>
    <body pos="1.3 0 0.1"><freejoint/><geom type="box" size="0.1 0.1 0.1"/></body>
    <body pos="-1 0 1"><freejoint/><geom type="sphere" size="0.1"/></body>
    <body pos="0 2 0.2">
      <joint name="cart" type="slide" axis="1 0 0" damping="0.5"/>
      <geom type="box" size="0.1 0.1 0.05" contype="0" conaffinity="0"/>
    </body>
  </worldbody>
  <actuator>
    <motor joint="shoulder" gear="2"/>
    <motor joint="cart" gear="1"/>
  </actuator>
</mujoco>)";

// a and b (ncol columns) equal bit for bit, the worst entries named if not
void ExpectSameBits(const mjModel* m, const std::vector<double>& a, const std::vector<double>& b,
                    int ncol, const std::string& what) {
  EXPECT_EQ(0, std::memcmp(a.data(), b.data(), sizeof(double) * a.size()))
      << what << "\n"
      << WorstEntries(m, a, b, ncol);
}

class ColumnSpanTest : public MujocoTest {
 protected:
  void TearDown() override {
    Derivative::column_spans_ = true;
    SmoothTangent::island_rows_ = true;
    MujocoTest::TearDown();
  }
};

TEST_F(ColumnSpanTest, SpanColumnsAreTheWholeColumns) {
  ModelPtr m = LoadString(kTrees);
  ASSERT_TRUE(m);
  const int ndx = 2 * m->nv + m->na;
  for (int solver = 0; solver < ckNSOLVER; solver++) {
    if (!ck_solverAvailable(solver)) continue;
    for (int variant = 0; variant < (solver == ckSOL_LCP ? 3 : 2); variant++) {
      m->opt.integrator = variant == 1 ? mjINT_IMPLICIT : mjINT_EULER;
      ckSettings s = Settings(solver);
      s.lcp.split_impulse = variant == 2;  // the position correction's second map
      HandlePtr ck = Make(m.get(), &s);
      DataPtr d(mj_makeData(m.get()));
      for (int t = 0; t < 40; t++) ck_step(ck.get(), m.get(), d.get());
      d->qvel[0] = 0.3;          // the first box slides
      d->qvel[m->nv - 1] = 0.2;  // the cart moves
      for (int i = 0; i < m->nu; i++) d->ctrl[i] = 0.3;
      const std::string what =
          std::string(ck_solverName(solver)) + " variant " + std::to_string(variant);

      Jacobians span(m.get()), whole(m.get());
      // an RK4 Jacobian first (its stages' solves must not hand their spans to the next call)
      const int integrator = m->opt.integrator;
      m->opt.integrator = mjINT_RK4;
      // (lcp's split impulse: differences under RK4, 1)
      ASSERT_LE(0, ck_transitionJac(ck.get(), m.get(), d.get(), span.A.data(), span.B.data(),
                                    nullptr, nullptr))
          << what << ": " << ck_lastError(ck.get());
      m->opt.integrator = integrator;
      Derivative::column_spans_ = true;
      const int r = ck_transitionJac(ck.get(), m.get(), d.get(), span.A.data(), span.B.data(),
                                     nullptr, nullptr);
      Derivative::column_spans_ = false;
      ASSERT_EQ(r, ck_transitionJac(ck.get(), m.get(), d.get(), whole.A.data(), whole.B.data(),
                                    nullptr, nullptr))
          << what;
      EXPECT_EQ(0, r) << what << ": " << ck_lastError(ck.get());

      // bit for bit, and not trivially: every column reaches its own dofs and B the motors'
      ExpectSameBits(m.get(), span.A, whole.A, ndx, what);
      ExpectSameBits(m.get(), span.B, whole.B, m->nu, what);
      for (int j = 0; j < ndx; j++) {
        int nonzero = 0;
        for (int i = 0; i < ndx; i++) nonzero += span.A[i * ndx + j] != 0;
        EXPECT_GT(nonzero, 0) << what << " column " << j;
      }
      for (int j = 0; j < m->nu; j++) {
        int nonzero = 0;
        for (int i = 0; i < ndx; i++) nonzero += span.B[i * m->nu + j] != 0;
        EXPECT_GT(nonzero, 1) << what << " control " << j;
      }
    }
  }
}

TEST_F(ColumnSpanTest, RowTangentsOnTheirIslandAreTheWholeRows) {
  // a position or velocity direction's row tangents formed on its tree's island's rows only, the
  // others kept zero from direction to direction (SmoothTangent::island_rows_): every solver's A
  // and B and the VJP are those of the tangents on every row, bit for bit, under Euler (the
  // analytic position tangents) and implicit (the position passes), after an RK4 Jacobian
  ModelPtr m = LoadString(kTrees);
  ASSERT_TRUE(m);
  const int ndx = 2 * m->nv + m->na;
  for (int solver = 0; solver < ckNSOLVER; solver++) {
    if (!ck_solverAvailable(solver)) continue;
    for (int variant = 0; variant < 2; variant++) {
      m->opt.integrator = variant == 1 ? mjINT_IMPLICIT : mjINT_EULER;
      ckSettings s = Settings(solver);
      HandlePtr ck = Make(m.get(), &s);
      DataPtr d(mj_makeData(m.get()));
      for (int t = 0; t < 40; t++) ck_step(ck.get(), m.get(), d.get());
      d->qvel[0] = 0.3;  // the first box slides
      d->qvel[6] = 0.2;  // the arm turns on the second box
      for (int i = 0; i < m->nu; i++) d->ctrl[i] = 0.3;
      ASSERT_GE(d->ncon, 5);
      const std::string what =
          std::string(ck_solverName(solver)) + " variant " + std::to_string(variant);

      Jacobians island(m.get()), every(m.get());
      std::vector<double> dx(ndx), gx[2], gu[2];
      for (int i = 0; i < ndx; i++) dx[i] = std::sin(1.0 + i);
      int r[2];
      for (int pass = 0; pass < 2; pass++) {
        SmoothTangent::island_rows_ = pass == 0;
        Jacobians& jac = pass == 0 ? island : every;
        const int integrator = m->opt.integrator;
        m->opt.integrator = mjINT_RK4;
        ASSERT_LE(0, ck_transitionJac(ck.get(), m.get(), d.get(), jac.A.data(), jac.B.data(),
                                      nullptr, nullptr))
            << what;
        m->opt.integrator = integrator;
        r[pass] = ck_transitionJac(ck.get(), m.get(), d.get(), jac.A.data(), jac.B.data(), nullptr,
                                   nullptr);
        gx[pass].resize(ndx);
        gu[pass].resize(m->nu);
        ASSERT_EQ(0, ck_transitionVJP(ck.get(), m.get(), d.get(), dx.data(), nullptr,
                                      gx[pass].data(), gu[pass].data()))
            << what << ": " << ck_lastError(ck.get());
      }
      ASSERT_EQ(0, r[0]) << what << ": " << ck_lastError(ck.get());
      ASSERT_EQ(0, r[1]) << what;
      ExpectSameBits(m.get(), island.A, every.A, ndx, what);
      ExpectSameBits(m.get(), island.B, every.B, m->nu, what);
      EXPECT_EQ(0, std::memcmp(gx[0].data(), gx[1].data(), sizeof(double) * ndx)) << what;
      EXPECT_EQ(0, std::memcmp(gu[0].data(), gu[1].data(), sizeof(double) * m->nu)) << what;

      // not trivially: the arm's and the boxes' position columns move the next velocities of
      // their island's other tree (through the rows) and not those of another island
      const int arm = 6, box2 = 10;  // the hinge's dof, the second box's first dof
      int coupled = 0;
      for (int j = arm; j < box2; j++) {
        for (int i = m->nv + box2; i < m->nv + box2 + 6; i++) coupled += island.A[i * ndx + j] != 0;
        for (int i = m->nv; i < m->nv + 6; i++) {
          EXPECT_EQ(0, island.A[i * ndx + j]) << what << ": the first box's row " << i;
        }
      }
      EXPECT_GT(coupled, 0) << what;
    }
  }
}

// a stack of three boxes, four balls in the air (trees of no island) between the middle box and
// the top one: nv = 42, and the last block of 32 directions (dq of dofs 22 to 41) holds the balls'
// and the top box's only, whose right-hand sides reach the middle box (their contact rows) but
// not the bottom one, which the stack's Hessian moves all the same
constexpr char kStack[] = R"(
<mujoco>
  <option timestep="0.005"/>
  <worldbody>
    <geom type="plane" size="5 5 0.1"/>
    <body pos="0 0 0.1"><freejoint/><geom type="box" size="0.1 0.1 0.1"/></body>
    <body pos="0 0 0.3"><freejoint/><geom type="box" size="0.1 0.1 0.1"/></body>
    <body pos="-1 0 1"><freejoint/><geom type="sphere" size="0.1"/></body>
    <body pos="-1 1 1"><freejoint/><geom type="sphere" size="0.1"/></body>
    <body pos="-1 2 1"><freejoint/><geom type="sphere" size="0.1"/></body>
    <body pos="-1 3 1"><freejoint/><geom type="sphere" size="0.1"/></body>
    <body pos="0 0 0.5"><freejoint/><geom type="box" size="0.1 0.1 0.1"/></body>
  </worldbody>
</mujoco>)";

TEST_F(ColumnSpanTest, BlockedColumnsReachTheirWholeIsland) {
  // the "mujoco" solver's blocked columns (QueueColumn, FlushColumns) on their reach: the islands
  // of their right-hand sides' trees, not only those trees
  ModelPtr m = LoadString(kStack);
  ASSERT_TRUE(m);
  const int ndx = 2 * m->nv + m->na, nv = m->nv;
  ASSERT_EQ(42, nv);
  for (int damped = 0; damped < 2; damped++) {
    for (int j = 0; j < m->njnt; j++) m->dof_damping[6 * j] = damped ? 0.3 : 0;
    ckSettings s = Settings(ckSOL_MUJOCO);
    HandlePtr ck = Make(m.get(), &s);
    DataPtr d(mj_makeData(m.get()));
    for (int t = 0; t < 40; t++) ck_step(ck.get(), m.get(), d.get());
    d->qvel[nv - 6] = 0.1;  // the top box slides on the middle one
    ASSERT_GE(d->ncon, 8);
    Jacobians span(m.get()), whole(m.get());
    Derivative::column_spans_ = true;
    ASSERT_EQ(0, ck_transitionJac(ck.get(), m.get(), d.get(), span.A.data(), span.B.data(), nullptr,
                                  nullptr))
        << ck_lastError(ck.get());
    Derivative::column_spans_ = false;
    ASSERT_EQ(0, ck_transitionJac(ck.get(), m.get(), d.get(), whole.A.data(), whole.B.data(),
                                  nullptr, nullptr))
        << ck_lastError(ck.get());
    ExpectSameBits(m.get(), span.A, whole.A, ndx, "damped " + std::to_string(damped));
    // not trivially: the top box's position directions move the bottom box's next velocity
    for (int j = nv - 6; j < nv; j++) {
      int nonzero = 0;
      for (int i = nv; i < nv + 6; i++) nonzero += span.A[i * ndx + j] != 0;
      EXPECT_GT(nonzero, 0) << "damped " << damped << ": dq " << j;
    }
  }
}

}  // namespace
}  // namespace contactkit::test
