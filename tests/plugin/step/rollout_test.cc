// Copyright 2026 The contactkit developers.
//
// ck_rollout: batched rollouts on a pool of threads give what one handle stepping each rollout
// alone gives, bit for bit, whatever the number of threads (tools/fuzz.sh also runs this under
// ThreadSanitizer); on MuJoCo 2.x it refuses with a message naming the version it needs.
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "support/fixture.h"

namespace contactkit::test {
namespace {

class RolloutTest : public MujocoTest {};

#if mjVERSION_HEADER >= 300

// nroll rollouts of nstep steps on nthread threads; state (nroll x nstep x nstate)
std::vector<mjtNum> Rollout(const mjModel* m, const ckSettings& s, int nthread, int nroll,
                            int nstep, const std::vector<mjtNum>& state0,
                            const std::vector<mjtNum>& control) {
  std::vector<ckHandle*> handles(nthread);
  std::vector<mjData*> datas(nthread);
  for (int k = 0; k < nthread; k++) {
    handles[k] = ck_make(m, &s, nullptr, 0);
    datas[k] = mj_makeData(m);
  }
  const int nstate = mj_stateSize(m, mjSTATE_FULLPHYSICS);
  std::vector<mjtNum> state(static_cast<size_t>(nroll) * nstep * nstate);
  char err[256];
  EXPECT_EQ(0, ck_rollout(m, handles.data(), datas.data(), nthread, nroll, nstep, mjSTATE_CTRL,
                          state0.data(), nullptr, control.data(), state.data(), nullptr, err,
                          sizeof(err)))
      << err;
  for (int k = 0; k < nthread; k++) {
    ck_free(handles[k]);
    mj_deleteData(datas[k]);
  }
  return state;
}

TEST_F(RolloutTest, ThreadsGiveTheRolloutsOfOneHandleOnMuJoCo3) {
  ModelPtr m = Load(BundledModel("hopper.xml"));
  ASSERT_TRUE(m);
  ASSERT_GT(m->nu, 0);
  const int nroll = 5, nstep = TestSteps(100);
  const int nstate = mj_stateSize(m.get(), mjSTATE_FULLPHYSICS);

  // initial states from a short run, controls that differ per rollout and step
  DataPtr d(mj_makeData(m.get()));
  std::vector<mjtNum> state0(static_cast<size_t>(nroll) * nstate);
  for (int r = 0; r < nroll; r++) {
    mj_step(m.get(), d.get());
    mj_getState(m.get(), d.get(), state0.data() + r * nstate, mjSTATE_FULLPHYSICS);
  }
  std::vector<mjtNum> control(static_cast<size_t>(nroll) * nstep * m->nu);
  for (size_t i = 0; i < control.size(); i++) control[i] = 0.5 * std::sin(0.37 * i);

  for (int solver = 0; solver < ckNSOLVER; solver++) {
    if (!ck_solverAvailable(solver)) continue;
    ckSettings s = Settings(solver);
    s.deriv.enabled = 0;  // rollouts need no derivative workspace

    // reference: one handle, each rollout from its state after ck_reset
    std::vector<mjtNum> ref(static_cast<size_t>(nroll) * nstep * nstate);
    HandlePtr ck = Make(m.get(), &s);
    for (int r = 0; r < nroll; r++) {
      mj_resetData(m.get(), d.get());
      mj_setState(m.get(), d.get(), state0.data() + r * nstate, mjSTATE_FULLPHYSICS);
      ck_reset(ck.get());
      for (int t = 0; t < nstep; t++) {
        const size_t step = static_cast<size_t>(r) * nstep + t;
        mju_copy(d->ctrl, control.data() + step * m->nu, m->nu);
        ck_step(ck.get(), m.get(), d.get());
        mj_getState(m.get(), d.get(), ref.data() + step * nstate, mjSTATE_FULLPHYSICS);
      }
    }

    for (int nthread : {1, 2, 3}) {
      const std::vector<mjtNum> got = Rollout(m.get(), s, nthread, nroll, nstep, state0, control);
      EXPECT_EQ(0, std::memcmp(got.data(), ref.data(), sizeof(mjtNum) * ref.size()))
          << "solver " << solver << ", " << nthread << " threads";
    }
  }
}

#else

TEST_F(RolloutTest, RefusedOnMuJoCo2) {
  ModelPtr m = Load(BundledModel("box_on_plane.xml"));
  ASSERT_TRUE(m);
  HandlePtr ck = Make(m.get());
  DataPtr d(mj_makeData(m.get()));
  ckHandle* handles[1] = {ck.get()};
  mjData* datas[1] = {d.get()};
  std::vector<mjtNum> state0(2 * m->nq + m->nv);
  char err[256];
  EXPECT_EQ(-1, ck_rollout(m.get(), handles, datas, 1, 1, 1, 0, state0.data(), nullptr, nullptr,
                           nullptr, nullptr, err, sizeof(err)));
  EXPECT_NE(std::string(err).find("needs MuJoCo 3.x"), std::string::npos) << err;
}

#endif

}  // namespace
}  // namespace contactkit::test
