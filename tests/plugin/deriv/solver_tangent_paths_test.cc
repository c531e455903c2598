// Copyright 2026 The contactkit developers.
//
// Paths of comfree's, lcp's and ipm's Jacobians against the ones they replace, on the humanoid in
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
//   column by column: A within 1e-13 (other sums), B bit for bit;
// - comfree's and lcp's dM x products (dM a, dM (v_free - v) / h, dM a_int, lcp's dM u) from
//   SmoothTangent::MassProduct's closed form, dM itself formed only where a solver reads it
//   (ProblemTangent::Mass(), SmoothTangent::set_lazy_mass), instead of dM formed for every
//   position direction and multiplied: A within 1e-14 (other sums), B bit for bit; also with
//   comfree's forms off, where its tangent reads the lazily formed dM itself;
// - comfree's dJ_i w_i (w_i = M^-1 J_i' of the rows whose inverse mass it differentiates,
//   Solver::TangentRowWeight) from w_i's body velocities, made once per solve, instead of those
//   rows' dJ column by column: A within 1e-14 (other sums), B bit for bit;
// - comfree's M^-1 J' of those rows in block solves per tree once per solve
//   (ComfreeSolver::RowSolves, TreeMass::SolveBlock) instead of one solve per row where first
//   read: bit for bit;
// - comfree's position directions' dv_free kept unsolved among the blocked slots', its J dv_free
//   term LinearTangents' (ComfreeSolver::free_split_on_) instead of solved one by one and read
//   by the direction's force tangent: A within 1e-14 (other sums), B bit for bit (no position
//   directions); the kept slots' force tangents from the map L = -(G / h) cvc P J formed once
//   per solve (ComfreeSolver::linear_map_on_, FormLinearMap) instead of J dv_free, then the facet
//   sums, per contact and slot: A and B within 1e-14 (other sums);
// - comfree's w' dM_k w of its rows for every k in SIMD lanes, kFormLanes rows at once
//   (MassForms::FormsLanes, ComfreeSolver::forms_lanes_on_) instead of row by row (Forms): bit
//   for bit, with the AVX2 clone and the portable code;
// - comfree's kept slots' dv_free solved in their block itself (blk_vf_, FreeVelocities without
//   scratch) and padded to a multiple of four columns, when every kept slot's is deferred,
//   instead of packed into a scratch block and copied back (ComfreeSolver::free_in_place_on_):
//   bit for bit, with the AVX2 clone and the portable code;
// - the blocked tangents' columns (Derivative::FlushTangents) moved into the row-major block
//   and back out in 4 x 4 tiles, out through mass_term (Derivative::transpose_tiles_on_), instead
//   of element by element with the block's stride: comfree, lcp and ipm bit for bit;
// - comfree's facet terms of a condim-3 contact in loops unrolled (FacetTerms::Add<3>) and
//   InvMassTangent's cached rows read without RowSolve's call (ComfreeSolver::facet_dims_on_),
//   instead of loops over dim: bit for bit;
// - comfree's dA of a cached row on one tree whose dJ w is given read from dJ_w and quad_ without
//   a pass over the row's trees (ComfreeSolver::wtree_cut_on_): bit for bit;
// - a direction that moves no position (velocity, control) hands comfree no anchor displacement
//   tangent (null) instead of its zeros (Derivative::zero_disp_null_on_): bit for bit;
// - the anchored contacts' displacement tangents (Derivative::AnchorTangent) with (dw x o) . F
//   as dw . (o x F), o x F formed once per stage (Derivative::anchor_crosses_on_): A within
//   1e-15 (other sums; the humanoid's floor frame gives the same bits), B bit for bit;
// - lcp's dense island matrix J M^-1 J' (LcpSolver::BuildA, in the step and the nominal stage)
//   from block solves of kRowBlock rows instead of one solve per row: bit for bit;
// - lcp's velocity directions' stabilization change on its clamped rows from J's column
//   (LcpSolver::VelocityRowTable, ProblemTangent::vel_unit) instead of the smooth stage's row
//   tangents d (J v) and d aref of every row: bit for bit, as the humanoid is (its clamped rows
//   have no velocity term: the table is empty) and with restitution and the root moving down
//   (approaching contacts: clamped rows with a velocity term);
// - lcp's dJ read in products only (Solver::ReadsJacobianProducts): dJ_C v+ and dJ' f of the
//   solution, and on a rank-deficient island dJ q~ and dJ' y~ of the null-space term
//   (Solver::TangentProducts), from the smooth stage's body velocities and wrench sums instead of
//   dJ formed column by column: B bit for bit, A within 1e-13 on the humanoid (its island rank
//   deficient; 1.0e-14 with approaching contacts, 7e-16 as it is) and within 1e-14 on a stack of
//   three free bodies (one island of three trees) and a table sliding on four feet (the only
//   scene whose null-space term reaches A: without dJ q~ A moves by 2e-6, without dJ' y~ by
//   3e-7). Fails with dJ' f or dJ v+ scaled by 1 + 1e-9 (every scene), dJ q~ or dJ' y~ by
//   1 + 1e-6 (the table);
// - lcp's position directions' dimp, dR and daref not formed where no clamped row is soft
//   (Solver::ReadsRowImpedance; lcp reads them on contacts from distance only): bit for bit, as
//   the humanoid is and with contacts from distance (cfd_width 0.02: the rows formed);
// - lcp's blocked dv0 solved in place when every slot has a right-hand side instead of packed
//   and copied back, its blocks padded to a multiple of four columns (LcpSolver::BlockVelocity,
//   BlockRowChange, BlockPinv): bit for bit;
// - lcp's QueueTangent stores with their operands chosen once per direction (QueueRhs,
//   QueueRows; LcpSolver::lean_queue_on_) instead of per entry: bit for bit, as the humanoid is,
//   with approaching contacts and with contacts from distance (soft rows: the per-entry path);
// - lcp's blocked dv0 solved in blk_r_ where QueueTangent put it (TreeMass::SolveBlock with a
//   stride) instead of copied into blk_x_ first, a slot without a null-space term turned into
//   forces in one pass (LcpSolver::lean_flush_on_): bit for bit;
// - lcp's blocked null-space term left out where the caller reads J' dforce alone
//   (Solver::SetForcesThroughJacobian) and its stored map is zero (LcpSolver::null_unread_on_):
//   A within 1e-14 on the humanoid (its null-space forces exert no generalized force), B and the
//   sliding table (whose pattern exerts one: the term formed) bit for bit;
// - comfree's position directions' dvel, dJ v+ and daref not formed (it reads no row velocity,
//   aref or dJ v+: Solver::ReadsRowVelocity, SmoothTangent::reference_unread_on_), only f's
//   wrenches, dimp and dR: bit for bit, as the humanoid is and with contacts from distance (whose
//   damping reads dR); fails with the contacts' dR or a carried wrench scaled by 1 + 1e-15;
// - the blocked path's y wrenches and dJ x rows summed, copied and cleared only for a solver
//   that gives y or x (SmoothTangent::lean_products_on_): comfree and lcp bit for bit, on the
//   humanoid and the sliding table (lcp's dJ' y~ read);
// - ipm's blocked tangents with dv_free unsolved (M dv_free = M e_unit + h x, no solve) and its
//   dM (v - v_free) from the same closed form: A and B to rounding (the deferral's h x is exact
//   where M M^-1 x was not), B bit for bit for the closed form;
// - ipm's dJ v and dJ' lambda of each row from its first nonzero entry of dJ (a direction off
//   the row's bodies' chains leaves the whole row zero) instead of over the whole row: bit for
//   bit;
// - comfree's rolling rows (condim 6) with their M^-1 J' among the block solves and their w' dM w
//   among the quad rows, their J dv'' from C = J w_s formed once per solve where no friction-loss
//   row moves (RollRowsTangent) instead of dv' and dv'' solved per direction, and dv'' = dv' where
//   none moves (ComfreeSolver::roll_quads_on_): A within 1e-13 (other sums), B within 1e-14, on
//   a chain with joint friction loss rolling on its condim-6 geoms, pyramidal and elliptic, the
//   friction-loss rows sliding (the new path) and sticking; fails with C df + w b scaled by
//   1 + 1e-9;
// - comfree's rolling shares' tangents (RollShareTangent) from dJ's entries gathered with their
//   weights and from w' dM_k u polarized into MassForms' forms, both once per solve
//   (ComfreeSolver::roll_gather_on_), instead of each pair's tree walks and w' dM u per direction:
//   A within 1e-13, B within 1e-14, dv+ / dq within 2e-17, on the same chain and a box; fails
//   with either scaled by 1 + 1e-9;
// - the blocked rows' sums of a contact none of whose rows' dJ the solver reads (lcp: dJ v+,
//   dJ x and the wrenches of f and y) from the point and frame tangents in 3-vectors
//   (SmoothTangent::PointRows) instead of each row's 6-vector tangents: A within 1e-13 (other
//   sums), B bit for bit, on the humanoid and the sliding table (lcp's dJ' y~ and dJ q~ read);
//   comfree (whose rows' dJ it reads) bit for bit;
// - the dM_k x products of the stage's three fixed vectors (dM a, dM (v_free - v) / h, dM a_int)
//   formed at once in SIMD lanes at the first one's call and read by the other two
//   (SmoothTangent::MassVectors, mass_terms_on_) instead of each formed on its own
//   (MassProductOf): comfree, lcp and ipm bit for bit, with the AVX2 clone and the portable code;
// - the anchored contacts' bodies in a direction's subtree (Derivative::AnchorTangent) by the
//   subtree's body range (SmoothTangent::InSubtree, subtree_range_on_) instead of up the
//   parents: bit for bit.
// - the carried dofs' sums of RneTangent, RneVelTangent and MassProduct from crb cdof and
//   Bsub' cdof transposed to six rows (SmoothTangent::dof_rows_on_: two dofs a vector) instead
//   of each dof's 6-vectors: every solver bit for bit;
// - lcp's lean slots' forces K^+ rc / h divided for all slots of a row at once
//   (LcpSolver::divided_rows_on_: the divisions vectorize) instead of per slot and row: bit for
//   bit;
// - lcp's J_C dv0 for a contact's rows of one pattern and K^+ rc for four rows at once
//   (LcpSolver::row_groups_on_, columns::RowsTimesWide) instead of row by row: bit for bit, with
//   the AVX2 clone and the portable code;
// - the blocked tangents' J' df of a contact's rows of one pattern at once (AddTransposeBlock
//   with the stage's row groups, Derivative::transpose_groups_on_) instead of row by row: lcp,
//   comfree and ipm bit for bit, with the AVX2 clone and the portable code.
#include <cmath>
#include <cstring>
#include <initializer_list>
#include <string>

#include "plugin/deriv/derivative.h"
#include "plugin/deriv/smooth_tangent.h"
#include "solvers/comfree/comfree.h"
#include "solvers/common/dense.h"
#include "solvers/ipm/ipm_solver.h"
#include "solvers/lcp/lcp.h"
#include "tests/plugin/deriv/deriv_util.h"
#include "tests/solvers/lcp/lcp_util.h"

namespace contactkit::test {
namespace {

class SolverTangentPathTest : public PathToggleTest {
 protected:
  void TearDown() override {
    SmoothTangent::defer_free_velocity_on_ = true;
    SmoothTangent::mass_forms_ = true;
    SmoothTangent::jacobian_rows_on_ = true;
    SmoothTangent::mass_products_on_ = true;
    SmoothTangent::row_weights_on_ = true;
    SmoothTangent::reference_unread_on_ = true;
    SmoothTangent::lean_products_on_ = true;
    ComfreeSolver::row_solves_on_ = true;
    ComfreeSolver::free_split_on_ = true;
    ComfreeSolver::linear_map_on_ = true;
    ComfreeSolver::free_in_place_on_ = true;
    ComfreeSolver::facet_dims_on_ = true;
    Derivative::transpose_tiles_on_ = true;
    Derivative::anchor_crosses_on_ = true;
    Derivative::zero_disp_null_on_ = true;
    ComfreeSolver::wtree_cut_on_ = true;
    ComfreeSolver::forms_lanes_on_ = true;
    ComfreeSolver::roll_quads_on_ = true;
    ComfreeSolver::roll_gather_on_ = true;
    Avx2Kernels::allowed_ = true;
    LcpSolver::block_rows_on_ = true;
    LcpSolver::velocity_rows_on_ = true;
    LcpSolver::jacobian_products_on_ = true;
    LcpSolver::impedance_unread_on_ = true;
    LcpSolver::block_in_place_on_ = true;
    LcpSolver::lean_queue_on_ = true;
    LcpSolver::lean_flush_on_ = true;
    LcpSolver::null_unread_on_ = true;
    ipm::IpmSolver::row_skip_on_ = true;
    SmoothTangent::point_rows_on_ = true;
    SmoothTangent::mass_terms_on_ = true;
    SmoothTangent::subtree_range_on_ = true;
    SmoothTangent::dof_rows_on_ = true;
    LcpSolver::divided_rows_on_ = true;
    LcpSolver::row_groups_on_ = true;
    Derivative::transpose_groups_on_ = true;
    PathToggleTest::TearDown();
  }
  // lcp's A on the scene xml within tol (0: bit for bit) with set(true) and set(false), B bit for
  // bit: after 200 steps of lcp, the velocities nudged (by_lcp), or after 300 of MuJoCo set
  // sliding
  template <class Set>
  void CompareOnScene(const char* xml, Set set, bool by_lcp, double tol) {
    ModelPtr m = LoadString(xml);
    ASSERT_TRUE(m);
    ckSettings s = Settings(ckSOL_LCP);
    HandlePtr ck = Make(m.get(), &s);
    DataPtr d(mj_makeData(m.get()));
    for (int t = 0; t < (by_lcp ? 200 : 300); t++) {
      if (by_lcp) {
        ck_step(ck.get(), m.get(), d.get());
      } else {
        mj_step(m.get(), d.get());
      }
    }
    for (int i = 0; i < m->nv && by_lcp; i++) d->qvel[i] += 0.05 * std::sin(1.0 + i);
    if (!by_lcp) {
      d->qvel[0] = 0.3;
      d->qvel[1] = 0.1;
    }
    ASSERT_GE(d->ncon, 4);
    Jacobians on(m.get()), off(m.get());
    for (int pass = 0; pass < 2; pass++) {
      set(pass == 0);
      Jacobians& jac = pass == 0 ? on : off;
      ASSERT_EQ(0, ck_transitionJac(ck.get(), m.get(), d.get(), jac.A.data(), jac.B.data(), nullptr,
                                    nullptr))
          << ck_lastError(ck.get());
    }
    set(true);
    if (tol == 0) {
      EXPECT_EQ(0, std::memcmp(on.A.data(), off.A.data(), on.A.size() * sizeof(double)));
    } else {
      EXPECT_LT(RelativeError(on.A, off.A), tol) << WorstEntries(m.get(), on.A, off.A, 2 * m->nv);
    }
    EXPECT_EQ(0, std::memcmp(on.B.data(), off.B.data(), on.B.size() * sizeof(double)));
  }
  // the humanoid's contacts approaching (the root moving down) with lcp's restitution 0.5:
  // clamped rows with a velocity term
  void Approach() {
    tweak_ = [](ckSettings* s) {
      s->lcp.restitution = 0.5;
      s->lcp.restitution_threshold = 0;
    };
    tweak_state_ = [](const mjModel*, mjData* d) { d->qvel[2] -= 0.3; };
  }
  // two boxes stacked on the plane: an island of two trees
  static constexpr const char* kTwoBoxes = R"(<mujoco><option timestep="0.005"/>
    <worldbody><geom type="plane" size="2 2 0.1"/>
      <body pos="0 0 0.1"><freejoint/><geom type="box" size="0.1 0.1 0.1"/></body>
      <body pos="0.02 0.01 0.28"><freejoint/><geom type="box" size="0.08 0.07 0.08"/></body>
    </worldbody></mujoco>)";
  // each solver's A within tol of each other (0: bit for bit), B within tol_b (0: bit for bit)
  template <class Set>
  void Compare(std::initializer_list<int> solvers, Set set, double tol, double tol_b = 0) {
    for (int solver : solvers) {
      CompareOnHumanoid(
          set,
          [](const mjModel*, const mjData*, const Jacobians&, const Jacobians&,
             const std::string&) {},
          solver, tol, tol_b);
    }
  }
  // comfree's A within tol_a and B within tol_b with set(true) and set(false) on a free capsule
  // with a two-hinge arm (joint friction loss floss, a motor) and a free box (four contacts
  // sharing its turn) on a plane, every geom condim 6, settled by comfree, the velocities nudged,
  // pyramidal and elliptic, the friction-loss rows sliding and sticking; the block dv+ / dq of A
  // within tol_vq where given (> 0: the rolling stops' share of A, small beside its identity)
  template <class Set>
  void CompareOnRollingChain(Set set, double tol_a, double tol_b, double tol_vq = 0) {
    for (const char* floss : {"0.001", "5"}) {
      for (const char* cone : {"pyramidal", "elliptic"}) {
        const std::string xml = std::string(R"(<mujoco><option timestep="0.005" cone=")") + cone +
                                R"("/><default><geom condim="6"/><joint frictionloss=")" + floss +
                                R"("/></default><worldbody><geom type="plane" size="2 2 0.1"/>
          <body pos="0 0 0.06"><freejoint/>
            <geom type="capsule" size="0.05 0.1" euler="0 90 0"/>
            <body pos="0.15 0 0"><joint name="a" type="hinge" axis="0 1 0" damping="0.05"/>
              <geom type="capsule" fromto="0 0 0 0.2 0 -0.01" size="0.04"/>
              <body pos="0.2 0 0"><joint type="hinge" axis="0 0 1"/>
                <geom type="sphere" size="0.04" pos="0.05 0 0"/></body></body></body>
          <body pos="1 0 0.1"><freejoint/><geom type="box" size="0.1 0.08 0.1"/></body>
          </worldbody><actuator><motor joint="a" gear="1"/></actuator></mujoco>)";
        ModelPtr m = LoadString(xml.c_str());
        ASSERT_TRUE(m);
        ckSettings s = Settings(ckSOL_COMFREE);
        HandlePtr ck = Make(m.get(), &s);
        DataPtr d(mj_makeData(m.get()));
        for (int t = 0; t < 200; t++) ck_step(ck.get(), m.get(), d.get());
        for (int i = 0; i < m->nv; i++) d->qvel[i] += 0.2 * std::sin(1.0 + i);
        const std::string what = std::string("floss ") + floss + ", " + cone;
        ASSERT_GE(d->ncon, 2) << what;
        Jacobians on(m.get()), off(m.get());
        ASSERT_TRUE(OnOff(m.get(), d.get(), ck.get(), set, &on, &off, what));
        EXPECT_LT(RelativeError(on.A, off.A), tol_a)
            << what << "\n"
            << WorstEntries(m.get(), on.A, off.A, 2 * m->nv);
        EXPECT_LT(RelativeError(on.B, off.B), tol_b) << what;
        if (!(tol_vq > 0)) continue;
        const int nv = m->nv, ndx = 2 * nv + m->na;
        std::vector<double> von, voff;
        for (int i = nv; i < 2 * nv; i++) {
          for (int j = 0; j < nv; j++) {
            von.push_back(on.A[i * ndx + j]);
            voff.push_back(off.A[i * ndx + j]);
          }
        }
        EXPECT_LT(RelativeError(von, voff), tol_vq) << what;
      }
    }
  }
  // comfree bit for bit with the AVX2 kernels, then with the portable code
  template <class Set>
  void CompareComfreeBothKernels(Set set) {
    Compare({ckSOL_COMFREE}, set, 0);
    Avx2Kernels::allowed_ = false;  // (the portable code)
    Compare({ckSOL_COMFREE}, set, 0);
  }
};

TEST_F(SolverTangentPathTest, BlockSolvedFreeVelocitiesAreThePerDirectionSolves) {
  auto set = [](bool on) { SmoothTangent::defer_free_velocity_on_ = on; };
  ComfreeSolver::free_split_on_ = false;  // (it needs the deferral: other sums, below)
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

TEST_F(SolverTangentPathTest, ComfreeRowWeightsGiveDJWFromBodyVelocities) {
  Compare(
      {ckSOL_COMFREE}, [](bool on) { SmoothTangent::row_weights_on_ = on; }, 1e-14);
}

TEST_F(SolverTangentPathTest, ComfreeRowSolvesInBlocksAreTheRowByRowSolves) {
  Compare(
      {ckSOL_COMFREE}, [](bool on) { ComfreeSolver::row_solves_on_ = on; }, 0);
}

TEST_F(SolverTangentPathTest, ComfreePositionFreeVelocitiesKeptAreTheSolvedOnes) {
  Compare(
      {ckSOL_COMFREE}, [](bool on) { ComfreeSolver::free_split_on_ = on; }, 1e-14);
}

TEST_F(SolverTangentPathTest, ComfreeLinearMapIsTheFacetSumsPerSlot) {
  Compare(
      {ckSOL_COMFREE}, [](bool on) { ComfreeSolver::linear_map_on_ = on; }, 1e-14, 1e-14);
}

TEST_F(SolverTangentPathTest, ComfreeFormsInLanesAreTheRowByRowForms) {
  CompareComfreeBothKernels([](bool on) { ComfreeSolver::forms_lanes_on_ = on; });
}

TEST_F(SolverTangentPathTest, ComfreeRollingRowsFromTheirCrossesAreTheVelocityPasses) {
  CompareOnRollingChain([](bool on) { ComfreeSolver::roll_quads_on_ = on; }, 1e-13, 1e-14);
}

TEST_F(SolverTangentPathTest, ComfreeRollingSharesFromGatherListsAndFormsAreThePairWalks) {
  // (the box's four contacts and the capsule's and the arm's share their trees: RollShare's cross
  // terms, here ~1e-7 of dv+ / dq, which a 1e-9 error in them moves by 6e-17 to 2e-16)
  CompareOnRollingChain([](bool on) { ComfreeSolver::roll_gather_on_ = on; }, 1e-13, 1e-14, 2e-17);
}

TEST_F(SolverTangentPathTest, ComfreeKeptFreeVelocitiesInPlaceAreThePackedSolve) {
  CompareComfreeBothKernels([](bool on) { ComfreeSolver::free_in_place_on_ = on; });
}

TEST_F(SolverTangentPathTest, BlockColumnsTransposedInTilesAreTheStridedCopies) {
  auto set = [](bool on) { Derivative::transpose_tiles_on_ = on; };
  Compare({ckSOL_COMFREE, ckSOL_LCP, ckSOL_IPM}, set, 0);
}

TEST_F(SolverTangentPathTest, ComfreeUnrolledFacetTermsAreTheLoopsOverDim) {
  Compare(
      {ckSOL_COMFREE}, [](bool on) { ComfreeSolver::facet_dims_on_ = on; }, 0);
}

TEST_F(SolverTangentPathTest, ComfreeOneTreeRowsWithoutTheirTreePassAreTheSame) {
  Compare(
      {ckSOL_COMFREE}, [](bool on) { ComfreeSolver::wtree_cut_on_ = on; }, 0);
}

TEST_F(SolverTangentPathTest, ZeroAnchorDisplacementsNullAreTheZeros) {
  Compare(
      {ckSOL_COMFREE}, [](bool on) { Derivative::zero_disp_null_on_ = on; }, 0);
}

TEST_F(SolverTangentPathTest, AnchorDisplacementsFromCrossesPerStageAreThePerDirectionOnes) {
  Compare(
      {ckSOL_COMFREE}, [](bool on) { Derivative::anchor_crosses_on_ = on; }, 1e-15);
}

TEST_F(SolverTangentPathTest, LcpIslandMatrixFromBlockSolvesIsTheRowByRowOne) {
  Compare(
      {ckSOL_LCP}, [](bool on) { LcpSolver::block_rows_on_ = on; }, 0);
}

TEST_F(SolverTangentPathTest, LcpVelocityRowsFromJColumnsAreTheSmoothStagesRows) {
  auto set = [](bool on) { LcpSolver::velocity_rows_on_ = on; };
  Compare({ckSOL_LCP}, set, 0);
  // (approaching contacts with restitution: clamped rows with a velocity term, the table filled)
  Approach();
  Compare({ckSOL_LCP}, set, 0);
}

TEST_F(SolverTangentPathTest, LcpJacobianProductsAreThoseOfDJ) {
  auto set = [](bool on) { LcpSolver::jacobian_products_on_ = on; };
  Compare({ckSOL_LCP}, set, 1e-13);  // (K's null space amplifies other sums' rounding)
  // (approaching contacts with restitution: clamped rows with a velocity term)
  Approach();
  Compare({ckSOL_LCP}, set, 1e-13);
  tweak_ = nullptr;
  tweak_state_ = nullptr;
  // (several trees in one island: a box on a box on the plane, a capsule on top, settled by lcp)
  CompareOnScene(R"(<mujoco><option timestep="0.005"/>
    <worldbody><geom type="plane" size="2 2 0.1"/>
      <body pos="0 0 0.1"><freejoint/><geom type="box" size="0.1 0.1 0.1"/></body>
      <body pos="0.02 0.01 0.28"><freejoint/><geom type="box" size="0.08 0.07 0.08"/></body>
      <body pos="-0.01 0.02 0.42" euler="0 90 0">
        <freejoint/><geom type="capsule" size="0.03 0.05"/></body>
    </worldbody></mujoco>)",
                 set, true, 1e-14);
  // (a table sliding on four feet of different friction: its null-space pattern exerts a
  // generalized force, dJ' y~ is read; settled by MuJoCo, LcpTangentTest's "table")
  CompareOnScene(LcpTableScene(), set, false, 1e-14);
}

TEST_F(SolverTangentPathTest, LcpUnreadImpedanceRowsAreNotFormed) {
  auto set = [](bool on) { LcpSolver::impedance_unread_on_ = on; };
  Compare({ckSOL_LCP}, set, 0);
  // (contacts from distance: clamped soft rows, whose dR and daref lcp reads, so formed)
  tweak_ = [](ckSettings* s) { s->deriv.cfd_width = 0.02; };
  Compare({ckSOL_LCP}, set, 0);
}

TEST_F(SolverTangentPathTest, ComfreeUnreadRowVelocityAndReferenceAreNotFormed) {
  auto set = [](bool on) { SmoothTangent::reference_unread_on_ = on; };
  Compare({ckSOL_COMFREE}, set, 0);
  // (contacts from distance: their damping reads dR, which is still formed)
  tweak_ = [](ckSettings* s) { s->deriv.cfd_width = 0.02; };
  Compare({ckSOL_COMFREE}, set, 0);
}

TEST_F(SolverTangentPathTest, LeanProductsAreTheFullOnes) {
  auto set = [](bool on) { SmoothTangent::lean_products_on_ = on; };
  Compare({ckSOL_COMFREE, ckSOL_LCP}, set, 0);
  CompareOnScene(LcpTableScene(), set, false, 0);  // (lcp's dJ' y~ read)
}

TEST_F(SolverTangentPathTest, LcpBlockVelocityInPlaceIsThePackedSolve) {
  auto set = [](bool on) { LcpSolver::block_in_place_on_ = on; };
  Compare({ckSOL_LCP}, set, 0);
  // (an island of two trees)
  CompareOnScene(kTwoBoxes, set, true, 0);
}

TEST_F(SolverTangentPathTest, LcpQueueStoresWithFixedOperandsAreThePerEntryOnes) {
  auto set = [](bool on) { LcpSolver::lean_queue_on_ = on; };
  Compare({ckSOL_LCP}, set, 0);
  // (approaching contacts with restitution: clamped rows with a velocity term)
  Approach();
  Compare({ckSOL_LCP}, set, 0);
  // (contacts from distance: clamped soft rows, whose dR and daref take the per-entry path)
  tweak_ = [](ckSettings* s) { s->deriv.cfd_width = 0.02; };
  tweak_state_ = nullptr;
  Compare({ckSOL_LCP}, set, 0);
}

TEST_F(SolverTangentPathTest, LcpVelocitySolvedInItsRightHandSideIsTheCopiedSolve) {
  auto set = [](bool on) { LcpSolver::lean_flush_on_ = on; };
  Compare({ckSOL_LCP}, set, 0);
  // (an island of two trees)
  CompareOnScene(kTwoBoxes, set, true, 0);
  CompareOnScene(LcpTableScene(), set, false, 0);
}

TEST_F(SolverTangentPathTest, LcpNullSpaceTermWithoutGeneralizedForceIsLeftOut) {
  // the humanoid's null-space forces exert no generalized force (its stored map is zero): A
  // within 1e-14 without them, B bit for bit (a control moves neither J nor M: no term)
  auto set = [](bool on) { LcpSolver::null_unread_on_ = on; };
  Compare({ckSOL_LCP}, set, 1e-14, 0);
  Approach();
  Compare({ckSOL_LCP}, set, 1e-14, 0);
  // (the sliding table's pattern exerts one, the term formed: bit for bit)
  CompareOnScene(LcpTableScene(), set, false, 0);
}

TEST_F(SolverTangentPathTest, MassProductsInClosedFormAreThoseOfDM) {
  Compare(
      {ckSOL_COMFREE, ckSOL_LCP}, [](bool on) { SmoothTangent::mass_products_on_ = on; }, 1e-14);
}

TEST_F(SolverTangentPathTest, LazyMassTangentIsFormedWhereTheSolverReadsIt) {
  // (comfree's forms off: its rows' w' dM w from dM itself, formed at the first read)
  SmoothTangent::mass_forms_ = false;
  Compare(
      {ckSOL_COMFREE}, [](bool on) { SmoothTangent::mass_products_on_ = on; }, 1e-14);
}

TEST_F(SolverTangentPathTest, IpmDeferredFreeVelocitiesAreMTimesTheirSolves) {
  // (M dv_free = M e_unit + h x without dv_free's solve: A and B to rounding)
  Compare(
      {ckSOL_IPM}, [](bool on) { SmoothTangent::defer_free_velocity_on_ = on; }, 1e-12, 1e-12);
}

TEST_F(SolverTangentPathTest, IpmMassProductsInClosedFormAreThoseOfDM) {
  // (dM (v - v_free) at the central point: A to rounding, B bit for bit)
  Compare(
      {ckSOL_IPM}, [](bool on) { SmoothTangent::mass_products_on_ = on; }, 1e-13);
}

TEST_F(SolverTangentPathTest, IpmRowsFromTheirFirstNonzeroDJAreTheWholeRows) {
  Compare(
      {ckSOL_IPM}, [](bool on) { ipm::IpmSolver::row_skip_on_ = on; }, 0);
}

TEST_F(SolverTangentPathTest, LcpPointRowsAreTheAxisTangentsRows) {
  auto set = [](bool on) { SmoothTangent::point_rows_on_ = on; };
  Compare({ckSOL_LCP}, set, 1e-13);
  Compare({ckSOL_COMFREE}, set, 0);
  CompareOnScene(LcpTableScene(), set, false, 1e-13);  // (lcp's dJ x and dJ' y~ read)
}

TEST_F(SolverTangentPathTest, MassTermsInLanesAreThePerVectorProducts) {
  auto set = [](bool on) { SmoothTangent::mass_terms_on_ = on; };
  Compare({ckSOL_COMFREE, ckSOL_LCP, ckSOL_IPM}, set, 0);
  Avx2Kernels::allowed_ = false;  // (the portable code)
  Compare({ckSOL_COMFREE, ckSOL_LCP, ckSOL_IPM}, set, 0);
}

TEST_F(SolverTangentPathTest, AnchorBodiesInSubtreeByRangeAreTheParentWalks) {
  Compare(
      {ckSOL_COMFREE}, [](bool on) { SmoothTangent::subtree_range_on_ = on; }, 0);
}

TEST_F(SolverTangentPathTest, DofSumsFromTransposedTablesAreTheSixVectorDots) {
  // RneTangent's, RneVelTangent's and MassProduct's carried dofs: every solver bit for bit
  auto set = [](bool on) { SmoothTangent::dof_rows_on_ = on; };
  Compare({ckSOL_MUJOCO, ckSOL_LCP, ckSOL_COMFREE, ckSOL_IPM}, set, 0);
  CompareOnScene(kTwoBoxes, set, true, 0);  // (two trees)
}

TEST_F(SolverTangentPathTest, LcpForcesDividedForAllSlotsAreThePerRowDivisions) {
  auto set = [](bool on) { LcpSolver::divided_rows_on_ = on; };
  Compare({ckSOL_LCP}, set, 0);
  Approach();
  Compare({ckSOL_LCP}, set, 0);
  CompareOnScene(kTwoBoxes, set, true, 0);
  CompareOnScene(LcpTableScene(), set, false, 0);
}

TEST_F(SolverTangentPathTest, LcpRowGroupsAreTheRowByRowProducts) {
  auto set = [](bool on) { LcpSolver::row_groups_on_ = on; };
  for (const bool avx2 : {true, false}) {
    Avx2Kernels::allowed_ = avx2;
    Compare({ckSOL_LCP}, set, 0);
    CompareOnScene(kTwoBoxes, set, true, 0);
    CompareOnScene(LcpTableScene(), set, false, 0);
  }
}

TEST_F(SolverTangentPathTest, BlockTransposeInRowGroupsIsTheRowByRowOne) {
  auto set = [](bool on) { Derivative::transpose_groups_on_ = on; };
  for (const bool avx2 : {true, false}) {
    Avx2Kernels::allowed_ = avx2;
    Compare({ckSOL_LCP, ckSOL_COMFREE, ckSOL_IPM}, set, 0);
    CompareOnScene(kTwoBoxes, set, true, 0);
  }
}

}  // namespace
}  // namespace contactkit::test
