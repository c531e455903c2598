// Copyright 2026 The contactkit developers.
//
// What the `mujoco` solver's Jacobian no longer recomputes (issue 18, fifteenth pass): the
// integrator adopts the extraction's factor of M or M + h D where it is the matrix it would
// factor (IntegratorTangent::AdoptFactor), and the blocked velocity columns no longer form the
// row tangents their one product per island does not read (SmoothTangent's
// set_velocity_rows_unread; and, nineteenth pass, comfree's blocked velocity directions, whose
// tangent reads no row velocity: Solver::ReadsRowVelocity). Both leave A and B bit for bit as
// they were, under every integrator that takes the path (Euler with and without damping, RK4,
// the implicit integrator), both cones and every solver (the other solvers adopt the factor of
// their shadow step's extraction).
#include <cstring>
#include <string>
#include <vector>

#include "plugin/deriv/derivative.h"
#include "tests/plugin/deriv/deriv_util.h"

namespace contactkit::test {
namespace {

class StageReuseJacTest : public MujocoTest {
 protected:
  void TearDown() override {
    IntegratorTangent::adopt_factors_ = true;
    SmoothTangent::skip_unread_rows_ = true;
    MujocoTest::TearDown();
  }
};

bool SameBits(const std::vector<double>& a, const std::vector<double>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), sizeof(double) * a.size()) == 0;
}

TEST_F(StageReuseJacTest, AdoptedFactorAndSkippedRowsLeaveTheJacobiansAsTheyWere) {
  ModelPtr m = Load(MujocoModel("humanoid/humanoid.xml"));
  ASSERT_TRUE(m);
  const int ndx = 2 * m->nv + m->na, nv = m->nv;
  const std::vector<double> damping(m->dof_damping, m->dof_damping + nv);
  const char* names[] = {"Euler damped", "Euler undamped", "RK4", "implicit", "elliptic"};
  // (the other solvers adopt the shadow step's factor; only "mujoco" has the velocity product)
  const int solvers[] = {ckSOL_MUJOCO, ckSOL_COMFREE, ckSOL_IPM, ckSOL_LCP};
  for (int variant = 0; variant < 5; variant++) {
    m->opt.integrator = variant == 2 ? mjINT_RK4 : variant == 3 ? mjINT_IMPLICIT : mjINT_EULER;
    m->opt.cone = variant == 4 ? mjCONE_ELLIPTIC : mjCONE_PYRAMIDAL;
    for (int i = 0; i < nv; i++) m->dof_damping[i] = variant == 1 ? 0 : damping[i];
    for (int solver : solvers) {
      const std::string what = std::string(names[variant]) + ", " + ck_solverName(solver);
      ckSettings s = Settings(solver);
      HandlePtr ck = Make(m.get(), &s);
      DataPtr d(mj_makeData(m.get()));
      for (int t = 0; t < 150; t++) ck_step(ck.get(), m.get(), d.get());
      for (int i = 0; i < nv; i++) d->qvel[i] += 0.1 * std::sin(1.0 + i);
      ASSERT_GE(d->ncon, 2) << what;

      // (each pass twice: the second call starts from the first's row tangents)
      Jacobians reuse(m.get()), own(m.get());
      int rc[4];
      for (int pass = 0; pass < 4; pass++) {
        IntegratorTangent::adopt_factors_ = pass < 2;
        SmoothTangent::skip_unread_rows_ = pass < 2;
        Jacobians& jac = pass < 2 ? reuse : own;
        rc[pass] = ck_transitionJac(ck.get(), m.get(), d.get(), jac.A.data(), jac.B.data(), nullptr,
                                    nullptr);
        ASSERT_GE(rc[pass], 0) << what << ": " << ck_lastError(ck.get());
      }
      EXPECT_EQ(rc[1], rc[3]) << what;
      EXPECT_TRUE(SameBits(reuse.A, own.A)) << what << "\n"
                                            << WorstEntries(m.get(), reuse.A, own.A, ndx);
      EXPECT_TRUE(SameBits(reuse.B, own.B)) << what;

      // not trivially: damping and the contacts couple the velocity columns beyond their own dof
      double coupled = 0;
      for (int j = nv; j < 2 * nv; j++) {
        for (int i = nv; i < 2 * nv; i++) {
          if (i != j) coupled += std::fabs(own.A[i * ndx + j]);
        }
      }
      EXPECT_GT(coupled, 1e-3) << what;
    }
  }
}

}  // namespace
}  // namespace contactkit::test
