// Copyright 2026 The contactkit developers.
//
// Two paths of comfree's and lcp's Jacobians against the ones they replace, on the humanoid in
// contact (one island, every dv_free reaching the contacts through the free root), pyramidal and
// elliptic, with and without joint damping:
// - blocked dv_free: the solvers' blocked force tangents take each direction's dv_free unsolved
//   (SmoothTangent::set_defer_free_velocity, Solver::DefersFreeVelocity) and solve a block's at
//   once (FreeVelocities: TreeMass::SolveBlock, the same operations per column as the
//   per-direction TreeMass::Solve): comfree's Jacobians bit for bit; lcp's joins them to its dv0's
//   solve (e_unit + h M^-1 (r + x)): A within 1e-14, B bit for bit;
// - comfree's w' dM_k w of its rows for every position direction k from the closed form of
//   SmoothTangent's MassForms, once per solve, instead of a pass over each direction's dM: A
//   within 1e-14 of its norm (other sums), B bit for bit (no dM);
// - comfree's dJ v_free from body velocities and dJ formed on the rows it reads only
//   (Solver::TangentJacobianRows, SmoothTangent::set_jacobian_rows) instead of every row's dJ
//   column by column: A within 1e-13 (other sums), B bit for bit.
#include <cmath>
#include <cstring>
#include <initializer_list>
#include <string>

#include "plugin/deriv/smooth_tangent.h"
#include "tests/plugin/deriv/deriv_util.h"

namespace contactkit::test {
namespace {

class SolverTangentPathTest : public MujocoTest {
 protected:
  void TearDown() override {
    SmoothTangent::defer_free_velocity_on_ = true;
    SmoothTangent::mass_forms_ = true;
    SmoothTangent::jacobian_rows_on_ = true;
    MujocoTest::TearDown();
  }

  // A and B with set(true) and with set(false) for each solver and variant; A within tol of its
  // norm (0: bit for bit), B bit for bit
  template <class Set>
  void Compare(std::initializer_list<int> solvers, Set set, double tol);
};

template <class Set>
void SolverTangentPathTest::Compare(std::initializer_list<int> solvers, Set set, double tol) {
  ModelPtr m = Load(MujocoModel("humanoid/humanoid.xml"));
  ASSERT_TRUE(m);
  const int nv = m->nv;
  for (int solver : solvers) {
    for (int variant = 0; variant < 3; variant++) {
      m->opt.cone = variant == 1 ? mjCONE_ELLIPTIC : mjCONE_PYRAMIDAL;
      for (int i = 6; i < nv; i++) m->dof_damping[i] = variant == 2 ? 0.5 : 0;
      ckSettings s = Settings(solver);
      HandlePtr ck = Make(m.get(), &s);
      DataPtr d(mj_makeData(m.get()));
      for (int t = 0; t < 150; t++) ck_step(ck.get(), m.get(), d.get());
      for (int i = 0; i < nv; i++) d->qvel[i] += 0.1 * std::sin(1.0 + i);
      for (int i = 0; i < m->nu; i++) d->ctrl[i] = 0.3 * std::cos(2.0 + i);
      const std::string what =
          std::string(ck_solverName(solver)) + ", variant " + std::to_string(variant);
      ASSERT_GE(d->ncon, 2) << what;
      Jacobians on(m.get()), off(m.get());
      for (int pass = 0; pass < 2; pass++) {
        set(pass == 0);
        Jacobians& jac = pass == 0 ? on : off;
        ASSERT_EQ(0, ck_transitionJac(ck.get(), m.get(), d.get(), jac.A.data(), jac.B.data(),
                                      nullptr, nullptr))
            << what << ": " << ck_lastError(ck.get());
      }
      const int ndx = 2 * nv + m->na;
      if (tol > 0) {
        EXPECT_LT(RelativeError(on.A, off.A), tol) << what << "\n"
                                                   << WorstEntries(m.get(), on.A, off.A, ndx);
      } else {
        EXPECT_EQ(0, std::memcmp(on.A.data(), off.A.data(), on.A.size() * sizeof(double)))
            << what << "\n"
            << WorstEntries(m.get(), on.A, off.A, ndx);
      }
      EXPECT_EQ(0, std::memcmp(on.B.data(), off.B.data(), on.B.size() * sizeof(double)))
          << what << "\n"
          << WorstEntries(m.get(), on.B, off.B, m->nu);
      double norm = 0;
      for (double x : on.B) norm += x * x;
      EXPECT_GT(norm, 0) << what;
    }
  }
}

TEST_F(SolverTangentPathTest, BlockSolvedFreeVelocitiesAreThePerDirectionSolves) {
  auto set = [](bool on) { SmoothTangent::defer_free_velocity_on_ = on; };
  Compare({ckSOL_COMFREE}, set, 0);
  Compare({ckSOL_LCP}, set, 1e-14);  // (joined to dv0's solve: other sums)
}

TEST_F(SolverTangentPathTest, ComfreeMassFormsAreTheQuadraticFormsOfDM) {
  Compare(
      {ckSOL_COMFREE}, [](bool on) { SmoothTangent::mass_forms_ = on; }, 1e-14);
}

TEST_F(SolverTangentPathTest, ComfreeRowsDJFreeVelocityFromBodyVelocities) {
  Compare(
      {ckSOL_COMFREE}, [](bool on) { SmoothTangent::jacobian_rows_on_ = on; }, 1e-13);
}

}  // namespace
}  // namespace contactkit::test
