// Copyright 2026 The contactkit developers.
//
// Margins and gaps of geom pairs on every MuJoCo version (plugin/step/compat.h): MuJoCo's own
// contacts follow GeomPairMargins, SetPairMargins (ck-run --margin) gives every pair the margin
// asked for, SyncBodyMargins keeps what the compiler set, and the derivative recollides pairs with
// MuJoCo's detection distance.
#include "plugin/step/compat.h"

#include <cmath>
#include <string>
#include <vector>

#include "tests/plugin/deriv/deriv_util.h"

namespace contactkit::test {
namespace {

class MarginTest : public MujocoTest {};

// a sphere above a plane, a sphere above a box (explicit pair) and two spheres side by side, with
// geom margins and gaps of their own
constexpr char kPairs[] = R"(
<mujoco>
  <option gravity="0 0 0"/>
  <worldbody>
    <geom name="floor" type="plane" size="5 5 0.1" margin="0.003" gap="0.001"/>
    <body name="s1" pos="0 0 0.105">
      <freejoint/>
      <geom name="s1" type="sphere" size="0.1" margin="0.02" gap="0.004"/>
    </body>
    <body name="s2" pos="1 0 0.1">
      <freejoint/>
      <geom name="s2" type="sphere" size="0.1" margin="0.01" gap="0.002" contype="2"
            conaffinity="2"/>
    </body>
    <body name="s3" pos="1.207 0 0.1">
      <freejoint/>
      <geom name="s3" type="sphere" size="0.1" margin="0.012" gap="0.003" contype="2"
            conaffinity="2"/>
    </body>
    <geom name="box" type="box" pos="3 0 0.1" size="0.1 0.1 0.1" contype="0" conaffinity="0"/>
    <body name="s4" pos="3 0 0.306">
      <freejoint/>
      <geom name="s4" type="sphere" size="0.1" contype="0" conaffinity="0"/>
    </body>
  </worldbody>
  <contact>
    <pair geom1="box" geom2="s4" margin="0.015" gap="0.005"/>
  </contact>
</mujoco>)";

// MuJoCo's contacts carry the inclusion margin of the rule, and pairs are reported exactly up to
// the rule's detection distance
TEST_F(MarginTest, MujocosContactsFollowTheRule) {
  ModelPtr m = LoadString(kPairs);
  ASSERT_TRUE(m);
  DataPtr d(mj_makeData(m.get()));
  mj_forward(m.get(), d.get());
  ASSERT_GE(d->ncon, 3);
  for (int i = 0; i < d->ncon; i++) {
    const mjContact& c = d->contact[i];
    const PairMargins pm = GeomPairMargins(m.get(), ContactGeom(&c, 0), ContactGeom(&c, 1));
    EXPECT_NEAR(c.includemargin, pm.include, 1e-15) << "contact " << i;
    EXPECT_LT(c.dist, pm.detect) << "contact " << i;
  }

  // each pair 0.1 mm inside, then 0.1 mm beyond its detection distance (free joints at 0, 7,
  // 14, 21 in qpos)
  const int floor = mj_name2id(m.get(), mjOBJ_GEOM, "floor");
  const int s1 = mj_name2id(m.get(), mjOBJ_GEOM, "s1"), s2 = mj_name2id(m.get(), mjOBJ_GEOM, "s2");
  const int s3 = mj_name2id(m.get(), mjOBJ_GEOM, "s3"), s4 = mj_name2id(m.get(), mjOBJ_GEOM, "s4");
  const int box = mj_name2id(m.get(), mjOBJ_GEOM, "box");
  struct Case {
    int g1, g2, coordinate;  // moving coordinate sets the pair's distance to value - base
    double base;
  };
  const Case cases[] = {{floor, s1, 2, 0.1}, {s2, s3, 14, 1.2}, {box, s4, 23, 0.3}};
  for (const Case& k : cases) {
    const double detect = GeomPairMargins(m.get(), k.g1, k.g2).detect;
    for (const double offset : {-1e-4, 1e-4}) {
      mj_resetData(m.get(), d.get());
      d->qpos[k.coordinate] = k.base + detect + offset;
      mj_forward(m.get(), d.get());
      int found = 0;
      for (int i = 0; i < d->ncon; i++) {
        const int a = ContactGeom(d->contact + i, 0), b = ContactGeom(d->contact + i, 1);
        found += (a == k.g1 && b == k.g2) || (a == k.g2 && b == k.g1);
      }
      EXPECT_EQ(found > 0, offset < 0)
          << "geoms " << k.g1 << ", " << k.g2 << " at " << offset << " from " << detect;
    }
  }
}

// ck-run --margin M: every pair, whatever its geoms' own margins and gaps, includes contacts closer
// than M and has no gap zone (on MuJoCo 3.5+ the tool gave pairs 2M before)
TEST_F(MarginTest, SetPairMarginsGivesEveryPairTheMargin) {
  ModelPtr m = LoadString(kPairs);
  ASSERT_TRUE(m);
  SetPairMargins(m.get(), 0.02);
  for (int g1 = 0; g1 < m->ngeom; g1++) {
    for (int g2 = g1 + 1; g2 < m->ngeom; g2++) {
      const PairMargins pm = GeomPairMargins(m.get(), g1, g2);
      EXPECT_EQ(pm.include, 0.02);
      EXPECT_EQ(pm.detect, 0.02);
    }
  }

  // the sphere 19 mm above the floor is a constraint with that margin, at 21 mm it is not seen
  const int s1 = mj_name2id(m.get(), mjOBJ_GEOM, "s1");
  DataPtr d(mj_makeData(m.get()));
  for (const double height : {0.119, 0.121}) {
    mj_resetData(m.get(), d.get());
    d->qpos[2] = height;
    mj_forward(m.get(), d.get());
    int found = 0;
    for (int i = 0; i < d->ncon; i++) {
      if (ContactGeom(d->contact + i, 0) != s1 && ContactGeom(d->contact + i, 1) != s1) continue;
      found++;
      EXPECT_EQ(d->contact[i].includemargin, 0.02);
      EXPECT_GE(d->contact[i].efc_address, 0);
    }
    EXPECT_EQ(found, height < 0.12 ? 1 : 0) << "height " << height;
  }
}

#if CK_MJ3
// MuJoCo 3.x only (2.x has no body_margin): with nothing edited, SyncBodyMargins reproduces the
// compiler's body margins (from 3.11 they include the geoms' gaps)
TEST_F(MarginTest, SyncBodyMarginsKeepsTheCompilersMargins) {
  ModelPtr m = LoadString(kPairs);
  ASSERT_TRUE(m);
  std::vector<double> compiled(m->body_margin, m->body_margin + m->nbody);
  SyncBodyMargins(m.get());
  for (int b = 0; b < m->nbody; b++) EXPECT_EQ(m->body_margin[b], compiled[b]) << "body " << b;
}
#endif

#if mjVERSION_HEADER >= 3009000
// MuJoCo 3.9+ only (gaps widen detection there): two bodies of two geoms each (tested through
// their bounding volumes with body_margin), 5 mm apart in their gap zone, keep their contacts
// when contactkit re-derives the body margins (it lost them, not adding the gaps)
TEST_F(MarginTest, SyncBodyMarginsKeepsContactsInTheGapZone) {
  ModelPtr m = LoadString(R"(
<mujoco>
  <option gravity="0 0 0"/>
  <worldbody>
    <body pos="0 0 0">
      <freejoint/>
      <geom type="box" size=".1 .1 .1" gap="0.01"/>
      <geom type="sphere" size=".05" pos="0 0 0.3" gap="0.01"/>
    </body>
    <body pos="0.205 0 0">
      <freejoint/>
      <geom type="box" size=".1 .1 .1" gap="0.01"/>
      <geom type="sphere" size=".05" pos="0 0 0.3" gap="0.01"/>
    </body>
  </worldbody>
</mujoco>)");
  ASSERT_TRUE(m);
  DataPtr d(mj_makeData(m.get()));
  mj_forward(m.get(), d.get());
  const int ncon = d->ncon;
  ASSERT_GT(ncon, 0);
  SyncBodyMargins(m.get());
  mj_forward(m.get(), d.get());
  EXPECT_EQ(d->ncon, ncon);
}
#endif

// a box tilted 7 to 23 mm above a plane (three corners), inside the pair margin of 25 mm that
// SetPairMargins gives on every version (geoms 12.5 mm each on 3.5+): MuJoCo pushes at that
// distance, and the analytic Jacobian must follow the distances as the box moves, which needs the
// pair recollided up to MuJoCo's detection distance (the larger geom margin, 12.5 mm, lost every
// corner on 3.5+)
TEST_F(MarginTest, JacobianAtADistanceInsideThePairMargin) {
  ModelPtr m = Load(BundledModel("box_on_plane.xml"));
  ASSERT_TRUE(m);
  SetPairMargins(m.get(), 0.025);
  Tighten(m.get());
  DataPtr d(mj_makeData(m.get()));
  d->qpos[2] = 0.119;
  const double q[4] = {1, 0.04, 0.02, 0};
  mju_copy4(d->qpos + 3, q);
  mju_normalize4(d->qpos + 3);
  d->qvel[2] = -0.1;
  ckSettings s = Settings(ckSOL_MUJOCO);
  HandlePtr ck = Make(m.get(), &s);
  ck_forward(ck.get(), m.get(), d.get());
  ASSERT_EQ(d->ncon, 3);
  for (int i = 0; i < d->ncon; i++) {
    ASSERT_GT(d->contact[i].dist, 0.005);
    ASSERT_GE(d->contact[i].efc_address, 0);
  }
  Jacobians ours(m.get()), fd(m.get());
  ASSERT_EQ(0,
            ck_transitionJac(ck.get(), m.get(), d.get(), ours.A.data(), nullptr, nullptr, nullptr));
  ASSERT_EQ(0, ck_transitionFD(ck.get(), m.get(), d.get(), 1e-6, 1, fd.A.data(), nullptr, nullptr,
                               nullptr));
  const int ndx = 2 * m->nv;
  EXPECT_LT(RelativeError(ours.A, fd.A), 1e-5) << WorstEntries(m.get(), ours.A, fd.A, ndx);
}

}  // namespace
}  // namespace contactkit::test
