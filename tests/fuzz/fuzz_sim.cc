// Copyright 2026 The contactkit developers.
//
// A short simulation with settings, options and a state drawn from the input: one of a few
// models, solver and integrator, settings by key from raw values (out-of-range ones must be
// refused with a message), a state that may hold NaN, inf or huge values, then ck_step,
// ck_setSettings, ck_transitionJac and ck_transitionVJP. Nothing may crash, reach mju_error or
// return an undocumented value. Workspace-size settings are bounded here (max_island_rows <= 64,
// pgs_iter <= 500, max_iter <= 200): larger ones are legal but allocate or iterate by design.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "contactkit/contactkit.h"
#include "tests/fuzz/fuzz_common.h"

namespace {

// bytes of the input, then zeros
class Input {
 public:
  Input(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  uint8_t Byte() { return pos_ < size_ ? data_[pos_++] : 0; }
  uint32_t U32() {
    uint32_t x = 0;
    for (int k = 0; k < 4; k++) x |= static_cast<uint32_t>(Byte()) << (8 * k);
    return x;
  }
  double Raw() {
    uint64_t x = 0;
    for (int k = 0; k < 8; k++) x |= static_cast<uint64_t>(Byte()) << (8 * k);
    double v;
    std::memcpy(&v, &x, sizeof(v));
    return v;
  }
  // a value of a few kinds: small, a raw double (NaN, inf, huge included), a special one
  double Value() {
    switch (Byte() % 4) {
      case 0:
        return (static_cast<int>(Byte()) - 128) / 16.0;
      case 1:
        return Raw();
      case 2: {
        const double special[] = {0, 1, -1, 1e10, -1e11, 1e300, NAN, INFINITY, -INFINITY, 1e-300};
        return special[Byte() % 10];
      }
      default:
        return std::ldexp(1.0, static_cast<int>(Byte() % 64) - 32);
    }
  }
  bool Done() const { return pos_ >= size_; }

 private:
  const uint8_t* data_;
  size_t size_, pos_ = 0;
};

const char* kModels[] = {
    // a box on a plane
    R"(<mujoco><worldbody><geom type="plane" size="2 2 .1"/>
       <body pos="0 0 .101"><freejoint/><geom type="box" size=".1 .1 .1"/></body>
       </worldbody></mujoco>)",
    // an actuated pendulum with a limit, friction loss and a sensor, touching the floor
    R"(<mujoco><worldbody><geom type="plane" size="2 2 .1"/>
       <body pos="0 0 .3"><joint name="j" type="hinge" axis="0 1 0" limited="true" range="-90 90"
         frictionloss=".1" damping=".2"/>
       <geom type="capsule" size=".05" fromto="0 0 0 .3 0 -.25"/><site name="s"/></body>
       </worldbody><actuator><motor joint="j" ctrlrange="-1 1" ctrllimited="true"/>
       <position joint="j" kp="10"/></actuator>
       <sensor><jointpos joint="j"/><accelerometer site="s"/></sensor></mujoco>)",
    // two stacked spheres and a box, with a weld and a tendon
    R"(<mujoco><worldbody><geom type="plane" size="2 2 .1"/>
       <body name="a" pos="0 0 .1"><freejoint/><geom type="sphere" size=".1"/></body>
       <body name="b" pos="0 0 .31"><freejoint/><geom type="sphere" size=".1"/></body>
       <body name="c" pos=".3 0 .1"><freejoint/><geom type="box" size=".1 .1 .1"/></body>
       </worldbody><equality><weld body1="a" body2="c" active="false"/></equality></mujoco>)",
    // no dofs at all
    R"(<mujoco><worldbody><geom type="plane" size="1 1 .1"/>
       <body><geom type="sphere" size=".1"/></body></worldbody></mujoco>)",
};
constexpr int kNumModels = sizeof(kModels) / sizeof(kModels[0]);

mjModel* g_models[kNumModels];

bool Init() {
  contactkit::fuzz::InstallHandlers();
  char error[1000];
  for (int i = 0; i < kNumModels; i++) {
    g_models[i] = ck_loadXMLString(kModels[i], error, sizeof(error));
    if (!g_models[i]) {
      std::fprintf(stderr, "fuzz_sim: model %d: %s\n", i, error);
      std::abort();
    }
  }
  return true;
}

void Check(bool ok, const char* what, const ckHandle* ck) {
  if (ok) return;
  std::fprintf(stderr, "%s (ck_lastError: %s)\n", what, ck ? ck_lastError(ck) : "");
  std::abort();
}

void Bound(ckSettings* s) {
  if (s->lcp.max_island_rows > 64) s->lcp.max_island_rows = 64;
  if (s->lcp.pgs_iter > 500) s->lcp.pgs_iter = 500;
  if (s->lcp.max_pivots > 100000) s->lcp.max_pivots = 100000;
  if (s->ipm.max_iter > 200) s->ipm.max_iter = 200;
  if (s->ipm.gap_recheck > 3) s->ipm.gap_recheck = 3;
}

// a few settings by key, from raw values
void DrawSettings(Input* in, ckSettings* s) {
  const int n = in->Byte() % 5;
  char text[64], error[512];
  for (int i = 0; i < n; i++) {
    const char* key = ck_settingKey(in->Byte() % ck_numSettingKeys());
    std::snprintf(text, sizeof(text), "%.17g", in->Value());
    error[0] = 0;
    if (ck_setSetting(s, key, text, error, sizeof(error)) != 0) Check(error[0], "no message", 0);
  }
  s->solver = in->Byte() % ckNSOLVER;
  if (!ck_solverAvailable(s->solver)) s->solver = ckSOL_MUJOCO;
  Bound(s);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const bool init = Init();
  (void)init;
  Input in(data, size);
  const mjModel* base = g_models[in.Byte() % kNumModels];
  mjModel* m = mj_copyModel(nullptr, base);

  // options
  const uint8_t opt = in.Byte();
  m->opt.integrator = opt % 3;  // Euler, RK4, implicit on 2.x (implicit, implicitfast ... on 3.x)
  m->opt.noslip_iterations = (opt >> 2) % 4;
  m->opt.cone = (opt >> 4) % 2;
  const double timesteps[] = {0.002, 0.01, 0.1, 1};
  m->opt.timestep = timesteps[(opt >> 5) % 4];

  ckSettings s;
  ck_defaultSettings(&s);
  DrawSettings(&in, &s);
  char error[1000];
  ckHandle* ck = ck_make(m, &s, error, sizeof(error));
  Check(ck || error[0], "ck_make returned NULL without a message", nullptr);
  if (!ck) {
    mj_deleteModel(m);
    return 0;
  }
  mjData* d = mj_makeData(m);

  // the state, controls and applied forces, then steps with settings changes between them
  for (int i = 0; i < m->nq; i++) d->qpos[i] += in.Byte() % 2 ? in.Value() : 0;
  for (int i = 0; i < m->nv; i++) d->qvel[i] = in.Byte() % 2 ? in.Value() : 0;
  for (int i = 0; i < m->nu; i++) d->ctrl[i] = in.Value();
  if (m->nv && in.Byte() % 4 == 0) d->qfrc_applied[in.Byte() % m->nv] = in.Value();
  const int ndx = 2 * m->nv + m->na;
  std::vector<mjtNum> A(ndx * ndx), B(ndx * m->nu), C(m->nsensordata * ndx), dx(ndx), gx(ndx);
  for (int round = 0; round < 3 && !in.Done(); round++) {
    const int nstep = 1 + in.Byte() % 3;
    for (int t = 0; t < nstep; t++) ck_step(ck, m, d);
    Check(ck_lastError(ck)[0] == 0, "ck_step failed on its own model", ck);
    const int r = ck_transitionJac(ck, m, d, A.data(), B.data(), C.data(), nullptr);
    Check(r >= -2 && r <= 1, "ck_transitionJac: undocumented return", ck);
    Check(r != -1 || !s.deriv.enabled, "ck_transitionJac: -1 on good arguments", ck);
    if (r == 0 || r == 1) {
      for (mjtNum x : A) Check(std::isfinite(x), "ck_transitionJac: non-finite A with 0 or 1", ck);
    }
    for (int i = 0; i < ndx; i++) dx[i] = in.Value();
    const int rv = ck_transitionVJP(ck, m, d, dx.data(), nullptr, gx.data(), nullptr);
    Check(rv >= -2 && rv <= 1, "ck_transitionVJP: undocumented return", ck);

    // new settings, with or without the model
    ckSettings next = s;
    DrawSettings(&in, &next);
    const bool with_model = in.Byte() % 2;
    error[0] = 0;
    const int rs = ck_setSettings(ck, with_model ? m : nullptr, &next, error, sizeof(error));
    Check((rs == 0) == (error[0] == 0), "ck_setSettings: return and message disagree", ck);
    if (rs == 0) {
      ckSettings got;
      ck_getSettings(ck, &got);
      Check(std::memcmp(&got, &next, sizeof(ckSettings)) == 0, "ck_getSettings differs", ck);
      s = next;
    }
  }
  mj_deleteData(d);
  ck_free(ck);
  mj_deleteModel(m);
  return 0;
}
