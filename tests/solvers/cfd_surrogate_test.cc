// Copyright 2026 The contactkit developers.
//
// The solvers' own laws for contacts from distance (docs/derivatives.md): on a problem with a
// contact beyond its margin marked as one (softplus position s(r), MuJoCo's continued impedance
// and reference acceleration, as the derivative's pass sets them), each solver's surrogate force
// pushes the bodies apart and ForceTangent is its derivative: central differences of the force
// the surrogate solves to (ipm: the central point; comfree, lcp: Solve) along v_free, the gap
// (the softplus position following it), the row velocity, the reference acceleration, R and J.
#include <algorithm>
#include <cmath>
#include <fstream>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "solvers/comfree/comfree.h"
#include "solvers/ipm/ipm_solver.h"
#include "solvers/lcp/lcp.h"
#include "support/fixture.h"
#include "tests/solvers/ipm/ipm_support.h"

namespace contactkit::test {
namespace {

constexpr double kWidth = 0.2;  // cfd_width of the surrogate

// softplus position s(r) = -tau log(1 + exp(-r / tau)), tau = width / 4, and its slope
double Softplus(double r, double* slope) {
  const double tau = 0.25 * kWidth;
  *slope = 1 / (1 + std::exp(r / tau));
  return -tau * std::log1p(std::exp(-r / tau));
}

struct Scene {
  std::string name;
  std::string xml;  // model
  double qpos0;     // qpos[0]
  double qvel0;     // qvel[0]
};

std::string ReadBundled(const std::string& name) {
  std::ifstream in(BundledModel(name));
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// the pusher 5 cm from the box moving towards it; the billiard balls 1 cm apart at the closest
// approach on the table (their table contacts plain, with friction). An explicit pair with a
// margin makes MuJoCo report the contact at distance.
std::vector<Scene> Scenes() {
  std::string pusher = ReadBundled("pusher_box.xml");
  const std::string tag = "</worldbody>";
  pusher.insert(pusher.find(tag) + tag.size(),
                "\n  <contact><pair geom1=\"pusher_geom\" geom2=\"box_geom\" condim=\"1\" "
                "margin=\"0.3\"/></contact>");
  std::string billiards = ReadBundled("billiards.xml");
  billiards.insert(billiards.find(tag) + tag.size(),
                   "\n  <contact><pair geom1=\"ball1_geom\" geom2=\"ball2_geom\" condim=\"3\" "
                   "friction=\"0.2 0.2 0.005 0.0001 0.0001\" margin=\"0.05\"/></contact>");
  return {{"pusher", pusher, 0.1, 0.3}, {"billiards", billiards, 1.0, 0.5}};
}

struct Case {
  std::string solver;
  Scene scene;
};

std::vector<Case> Cases() {
  std::vector<Case> out;
  for (const char* s : {"ipm", "comfree", "lcp"}) {
    for (const Scene& sc : Scenes()) out.push_back({s, sc});
  }
  return out;
}

class CfdSurrogate : public MujocoTest, public ::testing::WithParamInterface<Case> {
 protected:
  void SetUp() override {
    const Case& c = GetParam();
    m_ = LoadString(c.scene.xml);
    ASSERT_TRUE(m_);
    d_.reset(mj_makeData(m_.get()));
    if (c.scene.name == "billiards") {
      mj_resetDataKeyframe(m_.get(), d_.get(), 0);
      // ball 1 at the closest approach (x = 0), rolling on
      d_->qpos[0] = 0;
    } else {
      d_->qpos[0] = c.scene.qpos0;
      d_->qvel[0] = c.scene.qvel0;
    }
    mj_forward(m_.get(), d_.get());
    ex_ = std::make_unique<ExtractedProblem>(m_.get());
    ASSERT_TRUE(ex_->ok);
    ASSERT_EQ(ex_->Extract(m_.get(), d_.get()), 0);
    Problem& p = ex_->problem();

    // the contacts at positive distance become contacts from distance as the derivative's
    // pass makes them: margin 0, softplus position, MuJoCo's continued impedance (here a
    // fixed 0.5) in R and the reference acceleration
    for (int c = 0; c < p.ncon; c++) {
      Contact& con = p.con[c];
      if (con.dist < 1e-3) continue;  // the balls' table contacts rest at ~0
      const int row = con.row;
      con.margin = 0;
      p.margin[row] = 0;
      double slope;
      con.cfd_pos = Softplus(con.dist, &slope);
      con.cfd_slope = slope;
      const double imp = 0.5;
      for (int r = 0; r < con.dim; r++) {
        p.imp[row + r] = imp;
        p.R[row + r] = (1 - imp) / imp * p.diag_approx[row + r];
        p.aref[row + r] = -p.KB[2 * (row + r) + 1] * p.vel[row + r];
      }
      p.aref[row] -= p.KB[2 * row] * imp * con.cfd_pos;
      cfd_rows_.push_back(row);
      cfd_con_.push_back(c);
    }
    ASSERT_EQ(cfd_rows_.size(), 1u) << c.scene.name;

    ckSettings s = Settings(c.solver == "ipm"       ? ckSOL_IPM
                            : c.solver == "comfree" ? ckSOL_COMFREE
                                                    : ckSOL_LCP);
    s.ipm.kappa_grad = 1e-6;  // not what drives the contact from distance
    s.ipm.recovery_speed = 1e3;
    if (c.solver == "ipm") {
      solver_ = std::make_unique<ipm::IpmSolver>();
    } else if (c.solver == "comfree") {
      solver_ = MakeComfreeSolver();
    } else {
      solver_ = MakeLcpSolver();
    }
    std::string err;
    ASSERT_TRUE(solver_->Setup(ex_->ex.dims(), s, &err)) << err;
  }

  // the surrogate's force: Solve, and for ipm its central point
  std::vector<double> Force() {
    Problem& p = ex_->problem();
    Solution& sol = ex_->solution();
    solver_->Solve(p, &sol);
    const double* f = sol.force;
    if (GetParam().solver == "ipm") {
      f = static_cast<ipm::IpmSolver*>(solver_.get())->CentralForce(p);
      EXPECT_NE(f, nullptr);
      if (!f) return std::vector<double>(p.nrow, 0.0);
    }
    return std::vector<double>(f, f + p.nrow);
  }

  ModelPtr m_;
  DataPtr d_;
  std::unique_ptr<ExtractedProblem> ex_;
  std::unique_ptr<Solver> solver_;
  std::vector<int> cfd_rows_;  // normal row of each contact from distance
  std::vector<int> cfd_con_;   // and its contact
};

// the contact from distance pushes the bodies apart in the surrogate, with a force that fades
// as the gap grows
TEST_P(CfdSurrogate, PushesApartAndFadesWithDistance) {
  Problem& p = ex_->problem();
  const int row = cfd_rows_[0];
  Contact& con = p.con[cfd_con_[0]];
  const std::vector<double> f = Force();
  EXPECT_GT(f[row], 0) << GetParam().solver;

  // the same contact 1 cm farther: softplus position, reference acceleration and the gap itself
  const double a0 = p.aref[row], pos0 = p.pos[row], cp0 = con.cfd_pos, cs0 = con.cfd_slope;
  double slope;
  con.cfd_pos = Softplus(pos0 + 0.01, &slope);
  con.cfd_slope = slope;
  p.pos[row] = pos0 + 0.01;
  p.aref[row] = a0 - p.KB[2 * row] * p.imp[row] * (con.cfd_pos - cp0);
  const std::vector<double> g = Force();
  EXPECT_GT(g[row], 0) << GetParam().solver;
  EXPECT_LT(g[row], f[row]) << GetParam().solver;
  p.aref[row] = a0;
  p.pos[row] = pos0;
  con.cfd_pos = cp0;
  con.cfd_slope = cs0;
}

TEST_P(CfdSurrogate, ForceTangentMatchesFiniteDifferencesOfTheSurrogate) {
  Problem& p = ex_->problem();
  Solution& sol = ex_->solution();
  const int nv = p.nv, nr = p.nrow, nnz = p.J.nnz;
  std::mt19937 rng(5);
  std::uniform_real_distribution<double> uni(-1, 1);
  std::vector<double> dvf(nv), dpos(nr, 0.0), dvel(nr, 0.0), daref(nr, 0.0), dR(nr, 0.0), dJ(nnz);
  for (double& x : dvf) x = 0.1 * uni(rng);
  for (double& x : dJ) x = 0.01 * uni(rng);
  for (int row : cfd_rows_) {
    dpos[row] = 1e-2 * uni(rng);
    dvel[row] = 0.1 * uni(rng);
    daref[row] = 0.1 * std::fabs(p.aref[row]) * uni(rng);
    dR[row] = 0.1 * p.R[row] * uni(rng);
  }

  // the problem moved by t along direction which (gaps: the softplus position follows)
  std::vector<double> vf0(p.v_free, p.v_free + nv), pos0(p.pos, p.pos + nr),
      vel0(p.vel, p.vel + nr), aref0(p.aref, p.aref + nr), R0(p.R, p.R + nr),
      J0(p.J.val, p.J.val + nnz);
  auto apply = [&](int which, double t) {
    for (int j = 0; j < nv; j++) p.v_free[j] = vf0[j] + (which == 0 ? t * dvf[j] : 0);
    for (int i = 0; i < nr; i++) {
      p.pos[i] = pos0[i] + (which == 1 ? t * dpos[i] : 0);
      p.vel[i] = vel0[i] + (which == 2 ? t * dvel[i] : 0);
      p.aref[i] = aref0[i] + (which == 3 ? t * daref[i] : 0);
      p.R[i] = R0[i] + (which == 4 ? t * dR[i] : 0);
    }
    for (int i = 0; i < nnz; i++) p.J.val[i] = J0[i] + (which == 5 ? t * dJ[i] : 0);
    for (size_t k = 0; k < cfd_rows_.size(); k++) {
      const int row = cfd_rows_[k];
      Contact& con = p.con[cfd_con_[k]];
      double slope;
      con.cfd_pos = Softplus(p.pos[row], &slope);
      con.cfd_slope = slope;
    }
  };
  const char* names[6] = {"v_free", "pos", "vel", "aref", "R", "J"};
  for (int which = 0; which < 6; which++) {
    ProblemTangent dir;
    if (which == 0) dir.v_free = dvf.data();
    if (which == 1) dir.pos = dpos.data();
    if (which == 2) dir.vel = dvel.data();
    if (which == 3) dir.aref = daref.data();
    if (which == 4) dir.R = dR.data();
    if (which == 5) dir.J = dJ.data();
    apply(-1, 0);
    const std::vector<double> base = Force();
    std::vector<double> df(nr);
    ASSERT_TRUE(solver_->ForceTangent(p, sol, dir, df.data())) << names[which];
    const double eps = 1e-6;
    apply(which, eps);
    const std::vector<double> fp = Force();
    apply(which, -eps);
    const std::vector<double> fm = Force();
    apply(-1, 0);
    double fscale = 1e-9, dscale = 0;
    for (int i = 0; i < nr; i++) {
      fscale = std::max(fscale, std::fabs(base[i]));
      dscale = std::max(dscale, std::fabs(df[i]));
    }
    if (which == 0) {
      EXPECT_GT(std::fabs(df[cfd_rows_[0]]), 0) << GetParam().solver;
    }
    for (int i = 0; i < nr; i++) {
      const double fd = (fp[i] - fm[i]) / (2 * eps);
      EXPECT_NEAR(df[i], fd, 1e-5 * (dscale + fscale))
          << GetParam().solver << " " << GetParam().scene.name << " " << names[which] << " row "
          << i << " kind " << p.kind[i];
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Solvers, CfdSurrogate, ::testing::ValuesIn(Cases()),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return info.param.solver + "_" + info.param.scene.name;
                         });

}  // namespace
}  // namespace contactkit::test
