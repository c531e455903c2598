// Copyright 2026 The contactkit developers.
//
// The comfree solver on extracted problems: its facets are MuJoCo's pyramid edges, its forces
// are eq. 8 with eq. 12's gain computed independently through MuJoCo, the write-back puts the
// facet forces into efc_force, forces stay in the friction cone on random scenes, the force
// tangent matches central differences of Solve, and the parallel path changes nothing.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "plugin/step/extract.h"
#include "solvers/comfree/comfree.h"
#include "solvers/common/impedance.h"
#include "support/fixture.h"
#include "tools/common/gen_stack.h"

namespace contactkit::test {
namespace {

using ComfreeSolverTest = MujocoTest;

// spheres of condim 1, 3, 4 and 6 (and one more of 6, at rest, with friction loss on its free
// joint), a box, a hinge arm with friction
// loss hitting its limit and a connect to a free bob: every kind of row in one problem
const char kAllRows[] = R"(
<mujoco>
  <option timestep="0.002" cone="pyramidal"/>
  <worldbody>
    <geom name="floor" type="plane" size="5 5 .1" condim="1" friction="0 0 0"/>
    <body pos="0 0 0.1"><freejoint/>
      <geom type="sphere" size="0.1" condim="1" mass="1"/></body>
    <body pos="0.5 0 0.1"><freejoint/>
      <geom type="sphere" size="0.1" condim="3" friction="0.6 0.01 0.002" mass="1"/></body>
    <body pos="1 0 0.1"><freejoint/>
      <geom type="sphere" size="0.1" condim="4" friction="0.7 0.02 0.003" mass="1"/></body>
    <body pos="1.5 0 0.1"><freejoint/>
      <geom type="sphere" size="0.1" condim="6" friction="0.5 0.01 0.004" mass="1"/></body>
    <body pos="2 0 0.1" euler="0 0 20"><freejoint/>
      <geom type="box" size="0.1 0.15 0.1" condim="3" friction="0.8 0.01 0.002" mass="1"/></body>
    <body pos="2.5 0 0.1"><joint type="free" frictionloss="0.02"/>
      <geom type="sphere" size="0.1" condim="6" friction="0.5 0.01 0.004" mass="1"/></body>
    <body name="arm" pos="0 2 1">
      <joint name="hinge" type="hinge" axis="0 1 0" limited="true" range="-0.5 0.5"
             frictionloss="0.3" damping="0.2"/>
      <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.03" mass="1"/>
      <body name="arm2" pos="0.3 0 0">
        <joint name="elbow" type="hinge" axis="0 1 0"/>
        <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.03" mass="1"/>
      </body>
    </body>
    <body name="bob" pos="0.6 2 1"><freejoint/>
      <geom type="sphere" size="0.03" mass="0.5" contype="0" conaffinity="0"/></body>
    <body name="rollbox" pos="3 0 0.05" euler="0 0 30"><freejoint/>
      <geom type="box" size="0.1 0.06 0.05" condim="6" friction="0.6 0.01 0.003" mass="1"/></body>
  </worldbody>
  <equality><connect body1="arm2" body2="bob" anchor="0.3 0 0"/></equality>
</mujoco>)";

// a state with contacts sliding, rolling and spinning, the limit violated, the connect stretched
void PrepareAllRows(const mjModel* m, mjData* d) {
  for (int t = 0; t < 150; t++) mj_step(m, d);
  for (int b = 0; b < 5; b++) {
    double* v = d->qvel + 6 * b;
    v[0] += 0.3 + 0.1 * b;
    v[1] -= 0.2 * b;
    v[2] -= 0.05;
    v[3] += 1.0 - 0.3 * b;
    v[4] += 2.0 + 0.5 * b;
    v[5] += 3.0 - b;
  }
  const int hinge = m->jnt_qposadr[mj_name2id(m, mjOBJ_JOINT, "hinge")];
  d->qpos[hinge] = 0.52;
  d->qvel[m->jnt_dofadr[mj_name2id(m, mjOBJ_JOINT, "hinge")]] = 0.4;
  // a box on four rolling contacts (their stops share its turn: RollShare), tilting
  double* box = d->qvel + m->jnt_dofadr[m->body_jntadr[mj_name2id(m, mjOBJ_BODY, "rollbox")]];
  box[3] += 0.3;
  box[4] -= 0.2;
  mj_forward(m, d);
}

// an extracted problem and a comfree solver set up for it
struct Fixture {
  Extractor ex;
  ProblemStorage storage;
  ComfreeSolver solver;
  Fixture(const mjModel* m, const ckSettings& s) {
    std::string err;
    EXPECT_TRUE(ex.Setup(m, 0, &err)) << err;
    storage.Allocate(ex.dims(), m->dof_parentid, m->dof_Madr, ex.dof_tree().data(), ex.ntree());
    EXPECT_TRUE(solver.Setup(ex.dims(), s, &err)) << err;
  }
  Problem& p() { return storage.problem(); }
  Solution& sol() { return storage.solution(); }
};

// the facet row sum_r coef[r] J_r of a contact, dense
std::vector<double> FacetRow(const Problem& p, const Contact& con, const double* coef) {
  std::vector<double> row(p.nv, 0.0);
  for (int r = 0; r < con.dim; r++) p.J.AddRowTo(con.row + r, coef[r], row.data());
  return row;
}

// the facets of the default setting are MuJoCo's pyramid edges; the write-back stores the edge
// forces (the facets', re-split where the rolling stop moved a condim-6 contact's rolling forces)
// in efc_force, non-negative, and efc_J' efc_force is J' f
TEST_F(ComfreeSolverTest, DefaultFacetsAreMujocosPyramidEdges) {
  ModelPtr m = LoadString(kAllRows);
  ASSERT_TRUE(m);
  DataPtr d(mj_makeData(m.get()));
  PrepareAllRows(m.get(), d.get());
  Fixture fx(m.get(), Settings(ckSOL_COMFREE));
  Problem& p = fx.p();
  ASSERT_EQ(fx.ex.Extract(m.get(), d.get(), &p), 0);
  int dims[7] = {0};
  for (int c = 0; c < p.ncon; c++) dims[p.con[c].dim]++;
  ASSERT_GT(dims[1] * dims[3] * dims[4] * dims[6], 0) << "scene must have condim 1, 3, 4, 6";
  ASSERT_GT(p.ne * p.nf * p.nl, 0) << "scene must have equality, friction and limit rows";

  fx.solver.Solve(p, &fx.sol());
  ASSERT_NE(fx.sol().edge_force, nullptr);
  fx.ex.WriteBack(m.get(), d.get(), p, fx.sol());
  int active = 0;
  for (int c = 0; c < p.ncon; c++) {
    const Contact& con = p.con[c];
    double coef[6 * kComfreeMaxFacets], weight[kComfreeMaxFacets], facet[kComfreeMaxFacets];
    const int nf = ComfreeFacets(con, 4, coef, weight);
    ASSERT_EQ(nf, con.dim == 1 ? 1 : 2 * (con.dim - 1));
    ASSERT_EQ(fx.solver.FacetForce(c, facet), nf);
    for (int j = 0; j < nf; j++) {
      EXPECT_EQ(weight[j], 1.0);
      const std::vector<double> ours = FacetRow(p, con, coef + 6 * j);
      const std::vector<double> theirs = EfcRow(m.get(), d.get(), con.efc_address + j);
      for (int k = 0; k < m->nv; k++) {
        ASSERT_NEAR(ours[k], theirs[k], 1e-12) << "contact " << c << " facet " << j;
      }
      // the solver's edge forces, its facets' but where the rolling stop re-split a condim-6
      // contact's (ComfreeSolver::RollEdges)
      const double edge = fx.sol().edge_force[2 * con.row + j];
      EXPECT_EQ(d->efc_force[con.efc_address + j], edge) << "contact " << c;
      EXPECT_GE(edge, 0) << "contact " << c;
      if (con.dim < 6) {
        EXPECT_EQ(edge, facet[j]) << "contact " << c;
      }
      active += facet[j] > 0;
    }
  }
  EXPECT_GT(active, 0);

  // efc_J' efc_force equals J' f
  std::vector<double> a(m->nv), b(m->nv);
  mj_mulJacTVec(m.get(), d.get(), a.data(), d->efc_force);
  p.J.MulT(fx.sol().force, b.data());
  for (int k = 0; k < m->nv; k++) EXPECT_NEAR(a[k], b[k], 1e-9 * (1 + std::fabs(b[k])));
}

// rounder cones: symmetric unit directions scaled by the contact's mu; tangential facets share a
// total weight of 4, so a contact without tangential motion gets the same force for any count
TEST_F(ComfreeSolverTest, MoreTangentialFacetsShapeTheConeNotTheStiffness) {
  Contact con{};
  con.dim = 6;
  const double mu[5] = {0.6, 0.4, 0.01, 0.002, 0.003};
  for (int i = 0; i < 5; i++) con.mu[i] = mu[i];
  for (int n : {4, 6, 8, 16, 64}) {
    double coef[6 * kComfreeMaxFacets], weight[kComfreeMaxFacets];
    const int nf = ComfreeFacets(con, n, coef, weight);
    ASSERT_EQ(nf, n + 6);
    double wsum = 0, sum1 = 0, sum2 = 0;
    for (int j = 0; j < n; j++) {
      const double* c = coef + 6 * j;
      EXPECT_EQ(c[0], 1);
      EXPECT_NEAR(std::hypot(c[1] / mu[0], c[2] / mu[1]), 1, 1e-14) << n << " " << j;
      EXPECT_EQ(c[3], 0);
      wsum += weight[j];
      sum1 += c[1];
      sum2 += c[2];
    }
    EXPECT_NEAR(wsum, 4, 1e-14);
    EXPECT_NEAR(sum1, 0, 1e-14);
    EXPECT_NEAR(sum2, 0, 1e-14);
    for (int j = n; j < nf; j++) {
      const int axis = 3 + (j - n) / 2;
      EXPECT_EQ(weight[j], 1);
      EXPECT_EQ(std::fabs(coef[6 * j + axis]), mu[axis - 1]);
    }
  }

  // a sphere pressed into the plane with no tangential velocity
  ModelPtr m = LoadString(kAllRows);
  ASSERT_TRUE(m);
  DataPtr d(mj_makeData(m.get()));
  for (int t = 0; t < 150; t++) mj_step(m.get(), d.get());
  mju_zero(d->qvel, m->nv);
  d->qvel[6 * 3 + 2] = -0.1;  // condim-6 sphere
  mj_forward(m.get(), d.get());
  std::vector<double> fn;
  for (int n : {4, 8, 16}) {
    ckSettings s = Settings(ckSOL_COMFREE);
    s.comfree.facets = n;
    Fixture fx(m.get(), s);
    ASSERT_EQ(fx.ex.Extract(m.get(), d.get(), &fx.p()), 0);
    fx.solver.Solve(fx.p(), &fx.sol());
    EXPECT_EQ(fx.sol().edge_force != nullptr, n == 4);
    for (int c = 0; c < fx.p().ncon; c++) {
      const Contact& con = fx.p().con[c];
      if (con.dim == 6 && (con.body[0] == 4 || con.body[1] == 4))
        fn.push_back(fx.sol().force[con.row]);
    }
  }
  ASSERT_EQ(fn.size(), 3u);
  EXPECT_GT(fn[0], 0);
  EXPECT_NEAR(fn[1], fn[0], 1e-12 * fn[0]);
  EXPECT_NEAR(fn[2], fn[0], 1e-12 * fn[0]);
}

// eq. 8 and 12 for one sliding contact, from MuJoCo's own mass matrix and impedance, and the
// rolling stop on it
TEST_F(ComfreeSolverTest, ContactForceIsTheClosedForm) {
  ModelPtr m = LoadString(kAllRows);
  ASSERT_TRUE(m);
  for (int i = 0; i < m->nv; i++) m->dof_damping[i] = 0;  // M_eff = M
  DataPtr d(mj_makeData(m.get()));
  PrepareAllRows(m.get(), d.get());
  ckSettings s = Settings(ckSOL_COMFREE);
  s.comfree.stiffness = 0.3;
  s.comfree.damping = 0.004;
  s.comfree.relax_limit = 0;
  Fixture fx(m.get(), s);
  Problem& p = fx.p();
  ASSERT_EQ(fx.ex.Extract(m.get(), d.get(), &p), 0);
  fx.solver.Solve(p, &fx.sol());
  const double h = m->opt.timestep;

  int checked = 0;
  std::vector<double> facets(p.nrow, 0.0);  // the facets' forces
  for (int c = 0; c < p.ncon; c++) {
    const Contact& con = p.con[c];
    const mjContact& mc = d->contact[con.mj_index];
    const int nv = m->nv, dim = mc.dim;

    // MuJoCo's frame rows and v_smooth = v + h M^-1 qfrc_smooth
    std::vector<double> rows(6 * nv), vs(nv), x(nv);
    for (int r = 0; r < dim; r++) {
      std::vector<double> row(nv, 0.0);
      p.J.AddRowTo(con.row + r, 1, row.data());
      std::copy(row.begin(), row.end(), rows.begin() + r * nv);
    }
    mj_solveM(m.get(), d.get(), vs.data(), d->qfrc_smooth, 1);
    for (int i = 0; i < nv; i++) vs[i] = d->qvel[i] + h * vs[i];
    mj_solveM(m.get(), d.get(), x.data(), rows.data(), 1);
    const double A = mju_dot(rows.data(), x.data(), nv);
    mjtNum solimp[5];
    for (int i = 0; i < 5; i++) solimp[i] = mc.solimp[i];
    const double r = Impedance(solimp, mc.dist, mc.includemargin);
    const double M = r / (1 - r) / A, phi = mc.dist - mc.includemargin;

    // facets +-mu_i along each axis
    double f[6] = {0, 0, 0, 0, 0, 0};
    const double sn = mju_dot(rows.data(), vs.data(), nv);
    for (int j = 0; j < (dim == 1 ? 1 : 2 * (dim - 1)); j++) {
      const int axis = 1 + j / 2;
      const double sign = j % 2 == 0 ? 1 : -1;  // J_n + mu J_i first
      const double si =
          dim == 1 ? 0
                   : sign * mc.friction[axis - 1] * mju_dot(rows.data() + axis * nv, vs.data(), nv);
      const double s_facet = sn + si;
      const double lambda = std::max(0.0, M / h * (-0.3 * (s_facet * h + phi) - 0.004 * s_facet));
      f[0] += lambda;
      if (dim > 1) f[axis] += sign * mc.friction[axis - 1] * lambda;
    }
    for (int q = 0; q < std::min(dim, 4); q++) {
      EXPECT_NEAR(fx.sol().force[con.row + q], f[q], 1e-9 * (1 + std::fabs(f[0])))
          << "contact " << c << " row " << q;
    }
    std::copy(f, f + dim, facets.begin() + con.row);
    checked += f[0] > 0;
  }
  EXPECT_GE(checked, 4);

  // the rolling stop after the other rows and friction loss: v'' = v_smooth + h M^-1 J' f of the
  // facets and the plain rows, x_r = f_r - J_r v'' / (S_r h) with S_r = J_r M^-1 (J_r' + sum_q
  // +-J_q') over the other condim-6 contacts' rolling rows q (the box's four share its turn),
  // scaled into the pyramid's N - sum_{r<4} |f_r| / mu_r
  for (int i = 0; i < p.ne + p.nf + p.nl; i++) facets[i] = fx.sol().force[i];
  std::vector<double> vafter(m->nv), qf(m->nv), rowr(m->nv), xr(m->nv);
  p.J.MulT(facets.data(), qf.data());
  mj_solveM(m.get(), d.get(), vafter.data(), qf.data(), 1);
  mj_solveM(m.get(), d.get(), xr.data(), d->qfrc_smooth, 1);
  for (int i = 0; i < m->nv; i++) vafter[i] = d->qvel[i] + h * (xr[i] + vafter[i]);
  int rolled = 0;
  for (int c = 0; c < p.ncon; c++) {
    const Contact& con = p.con[c];
    if (con.dim < 6 || facets[con.row] == 0) continue;
    double x[2], budget = facets[con.row], norm = 0;
    for (int r = 0; r < 2; r++) {
      std::fill(rowr.begin(), rowr.end(), 0.0);
      p.J.AddRowTo(con.row + 4 + r, 1, rowr.data());
      mj_solveM(m.get(), d.get(), xr.data(), rowr.data(), 1);
      double S = mju_dot(rowr.data(), xr.data(), m->nv);
      for (int o = 0; o < p.ncon; o++) {
        for (int q = 4; q < 6 && o != c && p.con[o].dim == 6; q++) {
          std::vector<double> rowq(m->nv, 0.0);
          p.J.AddRowTo(p.con[o].row + q, 1, rowq.data());
          S += std::fabs(mju_dot(rowq.data(), xr.data(), m->nv));
        }
      }
      x[r] = facets[con.row + 4 + r] - mju_dot(rowr.data(), vafter.data(), m->nv) / (S * h);
      norm += std::fabs(x[r]) / con.mu[3 + r];
    }
    for (int r = 1; r < 4; r++) budget -= std::fabs(facets[con.row + r]) / con.mu[r - 1];
    const double scale = norm > budget ? std::max(budget, 0.0) / norm : 1;
    for (int r = 0; r < 2; r++) {
      EXPECT_NEAR(fx.sol().force[con.row + 4 + r], scale * x[r], 1e-9 * (1 + facets[con.row]))
          << "contact " << c << " rolling row " << r;
    }
    rolled++;
  }
  EXPECT_GT(rolled, 0);

  // v+ = v_smooth + h M^-1 J' f
  std::vector<double> qfrc(m->nv), v(m->nv);
  p.J.MulT(fx.sol().force, qfrc.data());
  mj_solveM(m.get(), d.get(), v.data(), qfrc.data(), 1);
  std::vector<double> vs(m->nv);
  mj_solveM(m.get(), d.get(), vs.data(), d->qfrc_smooth, 1);
  for (int i = 0; i < m->nv; i++) {
    EXPECT_NEAR(fx.sol().v_next[i], d->qvel[i] + h * (vs[i] + v[i]), 1e-9) << "dof " << i;
  }
}

// by construction the frame force of every contact lies in MuJoCo's elliptic cone (all friction
// families at once) and the pyramid edge forces are non-negative: random scenes, every step
TEST_F(ComfreeSolverTest, ForcesStayInTheFrictionCone) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> uni(0, 1);
  const int condims[4] = {1, 3, 4, 6};
  int checked = 0;
  for (int cone : {mjCONE_PYRAMIDAL, mjCONE_ELLIPTIC}) {
    for (int facets : {4, 8}) {
      ModelPtr m = LoadString(tools::StackedPrimitivesXML(3, 3, 2, 0.002, cone == mjCONE_ELLIPTIC));
      ASSERT_TRUE(m);
      for (int g = 0; g < m->ngeom; g++) {
        m->geom_condim[g] = condims[rng() % 4];
        m->geom_friction[3 * g] = 0.2 + uni(rng);
        m->geom_friction[3 * g + 1] = 0.02 * uni(rng);
        m->geom_friction[3 * g + 2] = 0.005 * uni(rng);
      }
      DataPtr d(mj_makeData(m.get()));
      for (int i = 0; i < m->nv; i++) d->qvel[i] = 2 * uni(rng) - 1;
      ckSettings s = Settings(ckSOL_COMFREE);
      s.comfree.facets = facets;
      HandlePtr ck = Make(m.get(), &s);
      for (int t = 0; t < TestSteps(400); t++) {
        ck_step(ck.get(), m.get(), d.get());
        for (int i = 0; i < d->ncon; i++) {
          const mjContact& c = d->contact[i];
          if (c.efc_address < 0) continue;
          mjtNum f[6];
          mj_contactForce(m.get(), d.get(), i, f);
          ASSERT_GE(f[0], 0) << "step " << t;
          double q = 0;
          for (int j = 1; j < c.dim; j++)
            q += f[j] * f[j] / (c.friction[j - 1] * c.friction[j - 1]);
          ASSERT_LE(std::sqrt(q), f[0] * (1 + 1e-9) + 1e-12) << "step " << t << " dim " << c.dim;
          if (cone == mjCONE_PYRAMIDAL && facets == 4 && c.dim > 1) {
            for (int e = 0; e < 2 * (c.dim - 1); e++) ASSERT_GE(d->efc_force[c.efc_address + e], 0);
          }
          checked += f[0] > 0;
        }
      }
    }
  }
  EXPECT_GT(checked, TestSteps(1000));
}

// a random perturbation of every problem input, sized to the data
struct Direction {
  std::vector<double> v_free, J, pos, R, M;
  ProblemTangent tangent() const {
    ProblemTangent t;
    t.v_free = v_free.data();
    t.J = J.data();
    t.pos = pos.data();
    t.R = R.data();
    t.M = M.data();
    return t;
  }
};

Direction RandomDirection(const Problem& p, std::mt19937* rng) {
  std::uniform_real_distribution<double> uni(-1, 1);
  Direction dir;
  for (int i = 0; i < p.nv; i++) dir.v_free.push_back(uni(*rng));
  for (int i = 0; i < p.J.nnz; i++) dir.J.push_back(uni(*rng) * (0.1 + std::fabs(p.J.val[i])));
  for (int i = 0; i < p.nrow; i++) dir.pos.push_back(uni(*rng) * 1e-3);
  for (int i = 0; i < p.nrow; i++) dir.R.push_back(uni(*rng) * 0.3 * p.R[i]);
  for (int i = 0; i < p.mass.nM; i++) dir.M.push_back(uni(*rng) * 0.05 * std::fabs(p.mass.M[i]));
  return dir;
}

// move the problem's inputs by eps along dir (eps = 0 restores base)
void Move(Problem* p, const Direction& base, const Direction& dir, double eps) {
  for (int i = 0; i < p->nv; i++) p->v_free[i] = base.v_free[i] + eps * dir.v_free[i];
  for (int i = 0; i < p->J.nnz; i++) p->J.val[i] = base.J[i] + eps * dir.J[i];
  for (int i = 0; i < p->nrow; i++) p->pos[i] = base.pos[i] + eps * dir.pos[i];
  for (int i = 0; i < p->nrow; i++) p->R[i] = base.R[i] + eps * dir.R[i];
  for (int i = 0; i < p->mass.nM; i++) p->mass.M[i] = base.M[i] + eps * dir.M[i];
  p->mass.Factor();
}

// activation pattern of the last solve: facets with positive force, friction rows within bounds
std::vector<int> Pattern(const Problem& p, const ComfreeSolver& solver, const Solution& sol) {
  std::vector<int> out;
  double facet[kComfreeMaxFacets];
  for (int c = 0; c < p.ncon; c++) {
    const int n = solver.FacetForce(c, facet);
    for (int j = 0; j < n; j++) out.push_back(facet[j] > 0);
  }
  for (int i = 0; i < p.ne + p.nf + p.nl; i++) {
    if (p.kind[i] == kRowLimit) out.push_back(sol.force[i] > 0);
    if (p.kind[i] == kRowFriction) out.push_back(std::fabs(sol.force[i]) < p.floss[i]);
  }
  out.push_back(solver.stats().nrolled);
  return out;
}

// the force tangent is the derivative of Solve: central differences along random directions of
// every input, with the relaxation limit off and binding, in a pyramidal and an elliptic model
// (the rolling stop's budgets), a rolling pair scaled by the cone and one not
TEST_F(ComfreeSolverTest, ForceTangentMatchesCentralDifferences) {
  ModelPtr m = LoadString(kAllRows);
  ASSERT_TRUE(m);
  std::mt19937 rng(3);
  for (int run = 0; run < 4; run++) {
    const double limit = run % 2 ? 0.02 : 0;
    m->opt.cone = run < 2 ? mjCONE_PYRAMIDAL : mjCONE_ELLIPTIC;
    SCOPED_TRACE(run < 2 ? "pyramidal" : "elliptic");
    DataPtr d(mj_makeData(m.get()));
    PrepareAllRows(m.get(), d.get());
    ckSettings s = Settings(ckSOL_COMFREE);
    s.comfree.relax_limit = limit;
    Fixture fx(m.get(), s);
    Problem& p = fx.p();
    Solution& sol = fx.sol();
    ASSERT_EQ(fx.ex.Extract(m.get(), d.get(), &p), 0);
    const int nrow = p.nrow, nv = p.nv;
    Direction base;
    base.v_free.assign(p.v_free, p.v_free + nv);
    base.J.assign(p.J.val, p.J.val + p.J.nnz);
    base.pos.assign(p.pos, p.pos + nrow);
    base.R.assign(p.R, p.R + nrow);
    base.M.assign(p.mass.M, p.mass.M + p.mass.nM);

    for (int trial = 0; trial < 4; trial++) {
      const Direction dir = RandomDirection(p, &rng);
      const double eps = 1e-7;
      std::vector<double> fp(nrow), fm(nrow), vp(nv), vm(nv);
      Move(&p, base, dir, eps);
      fx.solver.Solve(p, &sol);
      const std::vector<int> pattern_p = Pattern(p, fx.solver, sol);
      std::copy(sol.force, sol.force + nrow, fp.begin());
      std::copy(sol.v_next, sol.v_next + nv, vp.begin());
      Move(&p, base, dir, -eps);
      fx.solver.Solve(p, &sol);
      ASSERT_EQ(Pattern(p, fx.solver, sol), pattern_p) << "a kink lies within eps";
      std::copy(sol.force, sol.force + nrow, fm.begin());
      std::copy(sol.v_next, sol.v_next + nv, vm.begin());

      // analytic tangent at the base point
      Move(&p, base, dir, 0);
      fx.solver.Solve(p, &sol);
      EXPECT_EQ(fx.solver.stats().ncapped > 0, limit > 0);
      EXPECT_GT(fx.solver.stats().nrolled, 0);
      EXPECT_LT(fx.solver.stats().nrolled, fx.solver.stats().nroll);
      std::vector<double> df(nrow), dv(nv), scratch(nv);
      const ProblemTangent t = dir.tangent();
      ASSERT_TRUE(fx.solver.ForceTangent(p, sol, t, df.data()));
      VelocityTangent(p, sol, t, df.data(), dv.data(), scratch.data());
      double fscale = 0, vscale = 0;
      for (int i = 0; i < nrow; i++) fscale = std::max(fscale, std::fabs(df[i]));
      for (int i = 0; i < nv; i++) vscale = std::max(vscale, std::fabs(dv[i]));
      ASSERT_GT(fscale, 0);
      for (int i = 0; i < nrow; i++) {
        EXPECT_NEAR(df[i], (fp[i] - fm[i]) / (2 * eps), 1e-5 * fscale)
            << "row " << i << " kind " << p.kind[i] << " limit " << limit;
      }
      for (int i = 0; i < nv; i++) {
        EXPECT_NEAR(dv[i], (vp[i] - vm[i]) / (2 * eps), 1e-5 * vscale) << "dof " << i;
      }
    }
  }
}

// the reverse mode: PrepareAdjoint with force weights y, then AdjointDot along a direction, is y'
// ForceTangent along it, in a pyramidal and an elliptic model with rolling pairs scaled by the
// cone and not; y on every row, then on the rolling rows alone
TEST_F(ComfreeSolverTest, AdjointDotIsTheForceTangentsProduct) {
  ModelPtr m = LoadString(kAllRows);
  ASSERT_TRUE(m);
  std::mt19937 rng(11);
  std::uniform_real_distribution<double> uni(-1, 1);
  for (int cone : {mjCONE_PYRAMIDAL, mjCONE_ELLIPTIC}) {
    m->opt.cone = cone;
    SCOPED_TRACE(cone == mjCONE_ELLIPTIC ? "elliptic" : "pyramidal");
    DataPtr d(mj_makeData(m.get()));
    PrepareAllRows(m.get(), d.get());
    Fixture fx(m.get(), Settings(ckSOL_COMFREE));
    Problem& p = fx.p();
    Solution& sol = fx.sol();
    ASSERT_EQ(fx.ex.Extract(m.get(), d.get(), &p), 0);
    fx.solver.Solve(p, &sol);
    ASSERT_GT(fx.solver.stats().nrolled, 0);
    for (int rolling = 0; rolling < 2; rolling++) {
      std::vector<double> y(p.nrow, 0.0), df(p.nrow);
      for (int i = 0; i < p.nrow; i++) y[i] = uni(rng);
      for (int c = 0; c < p.ncon && rolling; c++) {
        const Contact& con = p.con[c];
        for (int r = 0; r < con.dim; r++) y[con.row + r] *= r >= 4;
      }
      for (int i = 0; i < p.ne + p.nf + p.nl && rolling; i++) y[i] = 0;
      ASSERT_TRUE(fx.solver.PrepareAdjoint(p, sol, y.data(), nullptr));
      for (int trial = 0; trial < 3; trial++) {
        const Direction dir = RandomDirection(p, &rng);
        const ProblemTangent t = dir.tangent();
        const double adjoint = fx.solver.AdjointDot(p, sol, t);
        ASSERT_TRUE(fx.solver.ForceTangent(p, sol, t, df.data()));
        double forward = 0, scale = 0;
        for (int i = 0; i < p.nrow; i++) {
          forward += y[i] * df[i];
          scale += std::fabs(y[i] * df[i]);
        }
        ASSERT_GT(scale, 0);
        EXPECT_NEAR(adjoint, forward, 1e-10 * scale) << "rolling rows only " << rolling;
      }
    }
  }
}

// a direction whose dM lies on one tree's rows, listed (ProblemTangent::M_rows: w'dMw of every
// gain row in one pass, QuadTangents) gives the tangent of the same direction unlisted (dM scanned
// tree by tree, SubQuadValues per row), and dM matters in it
TEST_F(ComfreeSolverTest, ForceTangentListedMassRowsMatchScan) {
  ModelPtr m = LoadString(kAllRows);
  ASSERT_TRUE(m);
  DataPtr d(mj_makeData(m.get()));
  PrepareAllRows(m.get(), d.get());
  std::mt19937 rng(5);
  Fixture fx(m.get(), Settings(ckSOL_COMFREE));
  Problem& p = fx.p();
  Solution& sol = fx.sol();
  ASSERT_EQ(fx.ex.Extract(m.get(), d.get(), &p), 0);
  fx.solver.Solve(p, &sol);
  const int nrow = p.nrow;
  int ntested = 0;
  for (int tree = 0; tree < p.islands.ntree; tree++) {
    const int b = p.islands.tree_dofadr[tree], e = b + p.islands.tree_dofnum[tree];
    Direction dir = RandomDirection(p, &rng);
    std::vector<int> rows;
    for (int i = 0; i < p.nv; i++) {
      const int m0 = p.mass.madr[i], m1 = i + 1 < p.nv ? p.mass.madr[i + 1] : p.mass.nM;
      for (int k = m0; k < m1; k++) dir.M[k] *= i >= b && i < e;
      if (i >= b && i < e) rows.push_back(i);
    }
    ProblemTangent listed = dir.tangent(), scan = dir.tangent(), none = dir.tangent();
    listed.M_rows = rows.data();
    listed.M_nrows = static_cast<int>(rows.size());
    none.M = nullptr;
    std::vector<double> df_listed(nrow), df_scan(nrow), df_none(nrow);
    ASSERT_TRUE(fx.solver.ForceTangent(p, sol, listed, df_listed.data()));
    ASSERT_TRUE(fx.solver.ForceTangent(p, sol, scan, df_scan.data()));
    ASSERT_TRUE(fx.solver.ForceTangent(p, sol, none, df_none.data()));
    double scale = 0, dm = 0;
    for (int i = 0; i < nrow; i++) {
      scale = std::max(scale, std::fabs(df_scan[i]));
      dm = std::max(dm, std::fabs(df_scan[i] - df_none[i]));
    }
    if (dm == 0) continue;  // (no gain row on this tree)
    ntested++;
    EXPECT_GT(dm, 1e-6 * scale) << "tree " << tree;
    for (int i = 0; i < nrow; i++)
      EXPECT_NEAR(df_listed[i], df_scan[i], 1e-12 * scale) << "tree " << tree << " row " << i;
  }
  EXPECT_GT(ntested, 0);
}

// ForceTangent keeps per-solve data from its first call after a Solve (the facet sums, the
// rows' w'dMw blocks per tree): after a Solve at another state its tangents are a fresh solver's
// bit for bit, for directions listing dM's rows tree by tree and for unlisted ones
TEST_F(ComfreeSolverTest, ForceTangentFollowsEachSolve) {
  ModelPtr m = LoadString(kAllRows);
  ASSERT_TRUE(m);
  DataPtr d(mj_makeData(m.get()));
  PrepareAllRows(m.get(), d.get());
  std::mt19937 rng(7);
  Fixture used(m.get(), Settings(ckSOL_COMFREE)), fresh(m.get(), Settings(ckSOL_COMFREE));
  // tangents of random directions, one per tree with dM on its rows listed, then one unlisted
  auto tangents = [&](Fixture& fx, std::mt19937 gen) {
    Problem& p = fx.p();
    std::vector<double> out;
    for (int tree = 0; tree <= p.islands.ntree; tree++) {
      Direction dir = RandomDirection(p, &gen);
      std::vector<int> rows;
      const int b = tree < p.islands.ntree ? p.islands.tree_dofadr[tree] : 0;
      const int e = tree < p.islands.ntree ? b + p.islands.tree_dofnum[tree] : p.nv;
      for (int i = 0; i < p.nv; i++) {
        const int m0 = p.mass.madr[i], m1 = i + 1 < p.nv ? p.mass.madr[i + 1] : p.mass.nM;
        for (int k = m0; k < m1; k++) dir.M[k] *= i >= b && i < e;
        if (i >= b && i < e) rows.push_back(i);
      }
      ProblemTangent t = dir.tangent();
      if (tree < p.islands.ntree) {
        t.M_rows = rows.data();
        t.M_nrows = static_cast<int>(rows.size());
      }
      std::vector<double> df(p.nrow);
      EXPECT_TRUE(fx.solver.ForceTangent(p, fx.sol(), t, df.data()));
      out.insert(out.end(), df.begin(), df.end());
    }
    return out;
  };
  ASSERT_EQ(used.ex.Extract(m.get(), d.get(), &used.p()), 0);
  used.solver.Solve(used.p(), &used.sol());
  const std::vector<double> first = tangents(used, rng);
  for (int t = 0; t < 5; t++) mj_step(m.get(), d.get());
  for (Fixture* fx : {&used, &fresh}) {
    ASSERT_EQ(fx->ex.Extract(m.get(), d.get(), &fx->p()), 0);
    fx->solver.Solve(fx->p(), &fx->sol());
  }
  const std::vector<double> again = tangents(used, rng), expected = tangents(fresh, rng);
  ASSERT_EQ(again.size(), expected.size());
  ASSERT_GT(used.solver.stats().nactive, 0);
  EXPECT_NE(again, first);  // (the state moved)
  for (size_t i = 0; i < again.size(); i++) EXPECT_EQ(again[i], expected[i]) << "entry " << i;
}

// the blocked force tangents (QueueTangent, FlushTangents) are ForceTangent's bit for bit: on the
// humanoid in contact (one island), the relaxation limit off and binding, directions along
// dv_free alone (kept and applied to all at once) between directions of every input (formed when
// queued), their arrays overwritten before the flush, one of each kind touching no island; bit
// for bit with the kept slots' facet sums per slot, to rounding (1e-14 of the largest entry) with
// their map L formed once per solve (ComfreeSolver::linear_map_on_)
TEST_F(ComfreeSolverTest, BlockedTangentsAreForceTangents) {
  ModelPtr m = Load(MujocoModel("humanoid/humanoid.xml"));
  ASSERT_TRUE(m);
  DataPtr d(mj_makeData(m.get()));
  for (int t = 0; t < 200; t++) mj_step(m.get(), d.get());
  std::mt19937 rng(13);
  for (int run = 0; run < 4; run++) {
    const double limit = run % 2 ? 0.02 : 0.0;
    const bool map = run >= 2;
    SCOPED_TRACE(limit);
    SCOPED_TRACE(map);
    ComfreeSolver::linear_map_on_ = map;
    ckSettings s = Settings(ckSOL_COMFREE);
    s.comfree.relax_limit = limit;
    Fixture fx(m.get(), s);
    Problem& p = fx.p();
    ASSERT_EQ(fx.ex.Extract(m.get(), d.get(), &p), 0);
    ASSERT_EQ(p.islands.nisland, 1);
    ASSERT_GT(p.ncon, 0);
    fx.solver.Solve(p, &fx.sol());
    ASSERT_EQ(fx.solver.TangentSlots(p), ComfreeSolver::kTangentSlots);
    const int n = 13, nrow = p.nrow;
    const uint8_t on = 1, off = 0;
    std::vector<Direction> dirs;
    std::vector<ProblemTangent> tangents;
    for (int k = 0; k < n; k++) dirs.push_back(RandomDirection(p, &rng));
    for (int k = 0; k < n; k++) {
      ProblemTangent t = dirs[k].tangent();
      if (k % 3 != 0) t.J = t.M = t.pos = t.R = nullptr;  // (dv_free alone)
      t.touched = k == 4 || k == 6 ? &off : &on;
      tangents.push_back(t);
    }
    std::vector<double> blocked(static_cast<size_t>(n) * nrow), one(nrow);
    for (int k = 0; k < n; k++) ASSERT_TRUE(fx.solver.QueueTangent(p, tangents[k], k));
    const std::vector<Direction> kept = dirs;
    for (Direction& dir : dirs) {
      for (auto* v : {&dir.v_free, &dir.J, &dir.pos, &dir.R, &dir.M})
        std::fill(v->begin(), v->end(), std::nan(""));
    }
    ASSERT_TRUE(fx.solver.FlushTangents(p, n, blocked.data()));
    for (int k = 0; k < n; k++) {
      dirs[k] = kept[k];
      ProblemTangent t = dirs[k].tangent();
      if (k % 3 != 0) t.J = t.M = t.pos = t.R = nullptr;
      t.touched = tangents[k].touched;
      ASSERT_TRUE(fx.solver.ForceTangent(p, fx.sol(), t, one.data()));
      double scale = 0;
      for (int i = 0; i < nrow; i++) scale = std::max(scale, std::fabs(one[i]));
      for (int i = 0; i < nrow; i++) {
        const double b = blocked[static_cast<size_t>(k) * nrow + i];
        if (map) {
          EXPECT_NEAR(b, one[i], 1e-14 * scale) << "direction " << k;
        } else {
          EXPECT_EQ(b, one[i]) << "direction " << k;
        }
      }
      EXPECT_EQ(scale > 0, k != 4 && k != 6) << "direction " << k;
    }
  }
  ComfreeSolver::linear_map_on_ = true;
}

// CoupledRelax's rows solved in blocks and its cross terms of one-tree rows read without
// TreeOffset (ComfreeSolver::coupled_blocks_on_) give the row-by-row path's forces, velocities,
// force tangents and adjoint products bit for bit: the humanoid lying in contact (one tree), its
// gains capped by the coupled bound
TEST_F(ComfreeSolverTest, CoupledBoundInBlocksIsTheRowByRowBound) {
  ModelPtr m = Load(MujocoModel("humanoid/humanoid.xml"));
  ASSERT_TRUE(m);
  DataPtr d(mj_makeData(m.get()));
  for (int t = 0; t < 200; t++) mj_step(m.get(), d.get());
  std::vector<double> out[2];
  for (int pass = 0; pass < 2; pass++) {
    ComfreeSolver::coupled_blocks_on_ = pass == 0;
    std::mt19937 rng(17);
    ckSettings s = Settings(ckSOL_COMFREE);
    s.comfree.relax_limit = 0.02;
    Fixture fx(m.get(), s);
    Problem& p = fx.p();
    Solution& sol = fx.sol();
    ASSERT_EQ(fx.ex.Extract(m.get(), d.get(), &p), 0);
    fx.solver.Solve(p, &sol);
    ASSERT_GT(fx.solver.stats().ncapped, 0);
    out[pass].assign(sol.force, sol.force + p.nrow);
    out[pass].insert(out[pass].end(), sol.v_next, sol.v_next + p.nv);
    std::vector<double> y(p.nrow), df(p.nrow);
    for (int i = 0; i < p.nrow; i++) y[i] = std::sin(1.0 + i);
    ASSERT_TRUE(fx.solver.PrepareAdjoint(p, sol, y.data(), nullptr));
    for (int trial = 0; trial < 3; trial++) {
      const Direction dir = RandomDirection(p, &rng);
      ASSERT_TRUE(fx.solver.ForceTangent(p, sol, dir.tangent(), df.data()));
      out[pass].insert(out[pass].end(), df.begin(), df.end());
      out[pass].push_back(fx.solver.AdjointDot(p, sol, dir.tangent()));
    }
  }
  ComfreeSolver::coupled_blocks_on_ = true;
  ASSERT_EQ(out[0].size(), out[1].size());
  for (size_t i = 0; i < out[0].size(); i++) EXPECT_EQ(out[0][i], out[1][i]) << "entry " << i;
}

// a box resting on a floor under gravity tilted 10 degrees along x (an incline, mu = 0.5)
const char kTiltedBox[] = R"(
<mujoco>
  <option timestep="0.002" gravity="1.7027 0 -9.6610" cone="pyramidal"/>
  <worldbody>
    <geom type="plane" size="5 5 .1" friction="0.5 0.005 0.0001"/>
    <body pos="0 0 0.1"><freejoint/>
      <geom type="box" size="0.1 0.1 0.1" mass="1"/></body>
  </worldbody>
</mujoco>)";

// A sliding anchored contact keeps the displacement that carries its share of the load, but
// never more than its motion left it: slipping at 1 cm/s in any direction from a fresh anchor (kept
// displacement 0), each of the box's four contacts keeps at most its slip over the step, and its
// stick force does no work along the slip. Before, a contact slipping down the incline kept its
// load share (0.12-0.18 mm against slips of 0.015-0.026 mm): a stick spring stretched with nothing
// moving, which pumped the A1's calves when their slip jittered in direction
TEST_F(ComfreeSolverTest, SlidingAnchorsStoreNoMoreThanTheirSlip) {
  ModelPtr m = LoadString(kTiltedBox);
  ASSERT_TRUE(m);
  DataPtr d(mj_makeData(m.get()));
  for (int t = 0; t < 300; t++) mj_step(m.get(), d.get());
  Fixture fx(m.get(), Settings(ckSOL_COMFREE));
  const double h = m->opt.timestep;
  double longest = 0;  // the largest kept displacement over the slip's length
  for (int k = 0; k < 8; k++) {
    const double a = 2 * M_PI * k / 8;
    DataPtr dk(mj_copyData(nullptr, m.get(), d.get()));
    dk->qvel[0] = 0.01 * std::cos(a);  // 1 cm/s, 20 um per step
    dk->qvel[1] = 0.01 * std::sin(a);
    mj_forward(m.get(), dk.get());
    Problem& p = fx.p();
    ASSERT_EQ(fx.ex.Extract(m.get(), dk.get(), &p), 0);
    ASSERT_EQ(p.ncon, 4);
    // every contact sliding (slip-speed envelope 1 m/s) from a fresh anchor
    std::vector<double> disp(p.nrow, 0.0);
    for (int c = 0; c < p.ncon; c++) disp[p.con[c].row] = 1;
    p.disp = disp.data();
    fx.solver.Solve(p, &fx.sol());
    const double* kept = fx.sol().anchor_disp;
    ASSERT_NE(kept, nullptr);
    for (int c = 0; c < p.ncon; c++) {
      const int row = p.con[c].row;
      const double slip[2] = {h * p.J.Dot(row + 1, fx.sol().v_next),
                              h * p.J.Dot(row + 2, fx.sol().v_next)};
      const double keep[2] = {kept[row + 1] + slip[0], kept[row + 2] + slip[1]};
      const double nslip = std::hypot(slip[0], slip[1]), nkeep = std::hypot(keep[0], keep[1]);
      ASSERT_GT(kept[row], 0) << "direction " << k << " contact " << c << ": not sliding";
      EXPECT_GT(nslip, 0) << "direction " << k << " contact " << c;
      EXPECT_LE(nkeep, nslip * (1 + 1e-12)) << "direction " << k << " contact " << c;
      EXPECT_GE(keep[0] * slip[0] + keep[1] * slip[1], -1e-15 * nslip * nslip)
          << "direction " << k << " contact " << c;
      longest = std::max(longest, nkeep / nslip);
    }
  }
  EXPECT_GT(longest, 0.5);  // some contact keeps a displacement: the load is carried
}

// a box resting flat on four condim-6 contacts and tilting: their rolling rows are one row (the
// box's turn about a tangent axis), each stop is computed from the same v'', and with each row's
// share S_r = A_r + sum_q |J_r M^-1 J_q'| (RollShare, 4 A_r here) the four stops end the turn
// within the step together. With their own A_r each stopped the whole turn: the box left the step
// turning at twice its rate (0.021, 0.044 rad/s; the Allegro's object rang from step to step)
TEST_F(ComfreeSolverTest, TheRollingStopsOfOneBodyEndItsTurnOnceTogether) {
  ModelPtr m = LoadString(R"(
<mujoco>
  <option timestep="0.002" cone="elliptic"/>
  <worldbody>
    <geom type="plane" size="5 5 .1"/>
    <body pos="0 0 0.05"><freejoint/>
      <geom type="box" size="0.1 0.06 0.05" condim="6" friction="0.6 0.01 0.05" mass="1"/></body>
  </worldbody>
</mujoco>)");
  ASSERT_TRUE(m);
  DataPtr d(mj_makeData(m.get()));
  for (int t = 0; t < 300; t++) mj_step(m.get(), d.get());
  d->qvel[3] = 0.02;  // tilting about x and y
  d->qvel[4] = -0.01;
  mj_forward(m.get(), d.get());
  Fixture fx(m.get(), Settings(ckSOL_COMFREE));
  Problem& p = fx.p();
  ASSERT_EQ(fx.ex.Extract(m.get(), d.get(), &p), 0);
  ASSERT_EQ(p.ncon, 4);
  fx.solver.Solve(p, &fx.sol());
  EXPECT_EQ(fx.solver.stats().nroll, 4);
  EXPECT_EQ(fx.solver.stats().nrolled, 0);  // (the cone leaves the stops room)
  for (int c = 0; c < p.ncon; c++) {
    for (int r = 4; r < 6; r++) {
      const int i = p.con[c].row + r;
      EXPECT_NEAR(p.J.Dot(i, fx.sol().v_next), 0, 1e-9) << "contact " << c << " row " << r;
      EXPECT_GT(std::fabs(p.J.Dot(i, p.v_free)), 0.009);  // (it turned)
    }
  }
}

// OpenMP over contacts gives the serial result bit for bit, and allocates nothing once warm
TEST_F(ComfreeSolverTest, ParallelContactsMatchSerialWithoutAllocating) {
  ModelPtr m = Load(BundledModel("stacked_primitives.xml"));
  ASSERT_TRUE(m);
  ckSettings serial = Settings(ckSOL_COMFREE), parallel = serial;
  serial.comfree.parallel_min = 1000000000;
  parallel.comfree.parallel_min = 1;
  DataPtr a(mj_makeData(m.get())), b(mj_makeData(m.get()));
  HandlePtr ha = Make(m.get(), &serial), hb = Make(m.get(), &parallel);
  const int steps = std::max(60, TestSteps(150));  // the bottom layer lands after ~30 steps
  for (int t = 0; t < steps; t++) {
    ck_step(ha.get(), m.get(), a.get());
    ck_step(hb.get(), m.get(), b.get());
  }
  ASSERT_GT(a->ncon, 20);
  EXPECT_EQ(0, std::memcmp(a->qpos, b->qpos, sizeof(mjtNum) * m->nq));
  EXPECT_EQ(0, std::memcmp(a->qvel, b->qvel, sizeof(mjtNum) * m->nv));
  if (AllocationCounter::Available()) {
    AllocationCounter counter;
    counter.Start();
    for (int t = 0; t < 20; t++) ck_step(hb.get(), m.get(), b.get());
    EXPECT_EQ(counter.Stop(), 0);
  }
}

}  // namespace
}  // namespace contactkit::test
