// Copyright 2026 The contactkit developers.
//
// The anchor table on its own: contacts find the anchor of their geom pair recorded at their
// point (the nearest unused one within kMatchRadius), whatever their order, with many anchors per
// pair and many pairs; contacts of other pairs, or far from every anchor, find none.
#include "plugin/step/anchor.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "support/fixture.h"

namespace contactkit::test {
namespace {

using AnchorTest = MujocoTest;

// a problem holding contacts only (dim 3, identity frames, rows 3c .. 3c + 2)
struct ContactSet {
  std::vector<Contact> con;
  Problem p;
  void Finish() {
    for (size_t c = 0; c < con.size(); c++) con[c].row = 3 * static_cast<int>(c);
    p.ncon = static_cast<int>(con.size());
    p.nrow = 3 * p.ncon;
    p.con = con.data();
  }
};

Contact MakeContact(const mjModel* m, int g1, int g2, const double pos[3]) {
  Contact c{};
  c.dim = 3;
  c.geom[0] = g1;
  c.geom[1] = g2;
  c.body[0] = m->geom_bodyid[g1];
  c.body[1] = m->geom_bodyid[g2];
  for (int i = 0; i < 3; i++) c.pos[i] = pos[i];
  for (int i = 0; i < 9; i++) c.frame[i] = (i % 4 == 0) ? 1 : 0;
  return c;
}

TEST_F(AnchorTest, AnchorsMatchTheirPairAndPointInAnyOrder) {
  ModelPtr m = Load(BundledModel("stacked_primitives.xml"));
  ASSERT_TRUE(m);
  DataPtr d(mj_makeData(m.get()));
  mj_forward(m.get(), d.get());
  ASSERT_GE(m->ngeom, 40);

  // 60 geom pairs with 1 to 6 anchors each, 5 cm apart (kMatchRadius is 1 cm)
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> u(-1, 1);
  ContactSet rec;
  for (int k = 0; k < 60; k++) {
    const int g1 = (7 * k) % m->ngeom, g2 = (7 * k + 1 + k % 5) % m->ngeom;
    const double base[3] = {u(rng), u(rng), 0.5 + u(rng)};
    for (int j = 0; j <= k % 6; j++) {
      const double pos[3] = {base[0] + 0.05 * j, base[1], base[2]};
      rec.con.push_back(MakeContact(m.get(), std::min(g1, g2), std::max(g1, g2), pos));
    }
  }
  rec.Finish();
  const int n = rec.p.ncon;
  std::vector<double> disp(rec.p.nrow);  // state, then the two tangential displacements
  for (int c = 0; c < n; c++) {
    disp[3 * c] = 1 + c;
    disp[3 * c + 1] = 1e-3 * u(rng);
    disp[3 * c + 2] = 1e-3 * u(rng);
  }

  Anchors anchors;
  anchors.Allocate(n + 8, 3 * (n + 8));
  anchors.Record(d.get(), rec.p, disp.data());
  EXPECT_EQ(anchors.size(), 0);  // pending until the step is taken
  anchors.Commit();
  ASSERT_EQ(anchors.size(), n);

  // the same contacts shuffled and moved by less than the match radius, plus three that must find
  // nothing: a pair never recorded, a recorded pair 3 cm from its anchors, and a second contact at
  // an anchor another contact already took
  std::vector<int> perm(n);
  for (int c = 0; c < n; c++) perm[c] = c;
  std::shuffle(perm.begin(), perm.end(), rng);
  ContactSet now;
  for (int c : perm) {
    Contact con = rec.con[c];
    for (int i = 0; i < 3; i++) con.pos[i] += 2e-3 * u(rng);
    now.con.push_back(con);
  }
  const Contact& first = rec.con[0];
  const double far[3] = {first.pos[0], first.pos[1] + 0.03, first.pos[2]};
  now.con.push_back(MakeContact(m.get(), 0, m->ngeom - 1, first.pos));
  now.con.push_back(MakeContact(m.get(), first.geom[0], first.geom[1], far));
  now.con.push_back(now.con[0]);
  now.Finish();

  const double* got = anchors.Displacements(d.get(), now.p);
  for (int c = 0; c < n; c++) {
    const int r = 3 * perm[c];
    EXPECT_EQ(got[3 * c], disp[r]) << "contact " << c;
    EXPECT_NEAR(got[3 * c + 1], disp[r + 1], 1e-12) << "contact " << c;
    EXPECT_NEAR(got[3 * c + 2], disp[r + 2], 1e-12) << "contact " << c;
    EXPECT_NE(anchors.Anchored(c), nullptr);
  }
  for (int c = n; c < n + 3; c++) {
    EXPECT_EQ(anchors.Anchored(c), nullptr) << "extra contact " << c - n;
    for (int i = 0; i < 3; i++) EXPECT_EQ(got[3 * c + i], 0) << "extra contact " << c - n;
  }

  // an empty commit keeps the table; Clear forgets it
  anchors.Commit();
  EXPECT_EQ(anchors.size(), n);
  anchors.Clear();
  got = anchors.Displacements(d.get(), now.p);
  for (int c = 0; c < now.p.ncon; c++) EXPECT_EQ(anchors.Anchored(c), nullptr);
}

// a condim-6 contact keeps its torsional and rolling angles as one world vector: recorded in one
// frame, they come back as its projections on the axes of a contact whose frame has turned
TEST_F(AnchorTest, AnglesKeptInTheWorldProjectOnTheTurnedFrame) {
  ModelPtr m = Load(BundledModel("stacked_primitives.xml"));
  ASSERT_TRUE(m);
  DataPtr d(mj_makeData(m.get()));
  mj_forward(m.get(), d.get());
  const double pos[3] = {0.1, 0.2, 0.3};
  Contact con = MakeContact(m.get(), 1, 2, pos);
  con.dim = 6;
  Problem p;
  p.ncon = 1;
  p.nrow = 6;
  p.con = &con;
  const double kept[6] = {0, 1e-3, -2e-3, 0.3, -0.2, 0.1};  // state, slip, torsion, rolling
  Anchors anchors;
  anchors.Allocate(4, 24);
  anchors.Record(d.get(), p, kept);
  anchors.Commit();

  // the same contact with its frame turned by 30 degrees about x: normal and tangents mix
  const double c30 = std::cos(M_PI / 6), s30 = std::sin(M_PI / 6);
  const double frame[9] = {1, 0, 0, 0, c30, s30, 0, -s30, c30};
  for (int i = 0; i < 9; i++) con.frame[i] = frame[i];
  const double* got = anchors.Displacements(d.get(), p);
  ASSERT_NE(anchors.Anchored(0), nullptr);
  const double* turn = anchors.Turn(0);
  EXPECT_NEAR(turn[0], 0.3, 1e-15);  // identity frame at recording: (torsion, roll1, roll2)
  EXPECT_NEAR(turn[1], -0.2, 1e-15);
  EXPECT_NEAR(turn[2], 0.1, 1e-15);
  EXPECT_NEAR(got[3], 0.3, 1e-15);
  EXPECT_NEAR(got[4], -0.2 * c30 + 0.1 * s30, 1e-15);
  EXPECT_NEAR(got[5], 0.2 * s30 + 0.1 * c30, 1e-15);
}

}  // namespace
}  // namespace contactkit::test
