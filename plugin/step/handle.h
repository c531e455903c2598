// Copyright 2026 The contactkit developers.
//
// What a ckHandle holds: settings, statistics, the problem storage, the selected solver and the
// integrator's scratch, all allocated by ck_make / ck_setSettings.
#ifndef CONTACTKIT_PLUGIN_HANDLE_H_
#define CONTACTKIT_PLUGIN_HANDLE_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "contactkit/contactkit.h"
#include "plugin/step/adaptive.h"
#include "plugin/step/anchor.h"
#include "plugin/step/extract.h"
#include "solvers/common/problem.h"
#include "solvers/common/solver.h"

namespace contactkit {

class Derivative;

// a new solver of the given kind, or null if this build does not have it
std::unique_ptr<Solver> MakeSolver(int solver);

// warnings a handle raises at most once
enum WarnOnce : int {
  kWarnCapacity = 0,  // contacts left out for lack of capacity
  kWarnNumerical,     // solver failed; best iterate kept
  kWarnInvalid,       // non-finite problem data
  kWarnModel,         // handle used with a different model
  kWarnAdaptive,      // an adaptive step could not reach its end
  kNumWarnOnce
};

}  // namespace contactkit

// what the gap re-check needs from MuJoCo during one constraint stage
struct ckRegap_ {
  const mjModel* m = nullptr;
  const mjData* d = nullptr;
  mjData* scratch = nullptr;  // q+ and its rows (owned by the handle)
  contactkit::Extractor* extractor = nullptr;
};

struct ckHandle_ {
  ckSettings settings;                         // current settings
  ckStats stats;                               // statistics of the last forward pass
  ckTotals totals = {};                        // counters since ck_make
  uint64_t fingerprint = 0;                    // ModelFingerprint of the handle's model
  char error[512] = "";                        // ck_lastError: why the last call failed
  int fallback = ckFALLBACK_NONE;              // ck_lastFallback: ckFallback of the last
                                               // ck_transitionJac / ck_transitionVJP
  std::atomic<bool> in_use{false};             // an entry point is running on the handle
  contactkit::Extractor extractor;             // model structure and capacities
  contactkit::ProblemStorage storage;          // problem and solution arrays
  std::unique_ptr<contactkit::Solver> solver;  // null for the "mujoco" pass-through
  std::vector<double> rk;                      // RK4 stages: X (4 x nq+nv+na), F (4 x nv+na), dX
  contactkit::AdaptiveIntegrator adaptive;     // integrator tsit5 / dopri5: stages, controller
  contactkit::Anchors anchors;                 // comfree contact anchors (comfree.anchor)
  std::vector<double> position_fix;            // pseudo-velocity for after the step    (nv)
  bool position_pending = false;               // position_fix holds this step's correction
  std::vector<double> implicit_lu;             // guard_implicit: M - h qDeriv checked        (nD)
  std::vector<double> implicit_mass;           // guard_implicit: M, MuJoCo's legacy layout  (nM)
  bool guard_implicit = false;  // StepSkip refuses a step MuJoCo's implicit integrator could not
                                // factor (the derivative's own handle; costs a second qDeriv)
  bool step_refused = false;    // the last StepSkip left the state unstepped
  bool hold_stage = false;      // RK4 stages after the first: record nothing
  bool warned[contactkit::kNumWarnOnce] = {};     // warn-once flags
  ckRegap_ regap;                                 // gap re-check context (ipm gap_recheck > 0)
  std::unique_ptr<contactkit::Derivative> deriv;  // derivative workspace (deriv/derivative.h)

  ckHandle_();
  ~ckHandle_();
};

namespace contactkit {

// raise a warning through MuJoCo's mechanism once per handle and kind
void WarnOnceMsg(ckHandle* ck, WarnOnce kind, const char* msg);

// the handle keeps contact anchors (comfree with anchor = 1)
bool UsesAnchors(const ckHandle* ck);

// the constraint stage: the selected solver where MuJoCo calls mj_fwdConstraint
void ConstraintStage(ckHandle* ck, const mjModel* m, mjData* d);

// hash of everything a handle's workspace is sized from: sizes, kinematic tree, joint / geom /
// equality / tendon / actuator / sensor structure, the rows a model has besides contacts
uint64_t ModelFingerprint(const mjModel* m);

// ck_lastError's message: "fn: msg" (printf-style)
void SetLastError(ckHandle* ck, const char* fn, const char* fmt, ...)
    __attribute__((format(printf, 3, 4)));

// the one model check of every entry point: ck and m are not NULL and m is the model ck was made
// for (by ModelFingerprint); otherwise ck_lastError says why (and, with warn, a MuJoCo warning
// once per handle) and the result is false
bool CheckModel(ckHandle* ck, const mjModel* m, const char* fn, bool warn);

// CheckModel, and d is not NULL: the checks every entry point on (m, d) starts with
bool CheckEntry(ckHandle* ck, const mjModel* m, const mjData* d, const char* fn, bool warn);

// marks a handle in use for the lifetime of the guard (every public entry point that works on the
// handle); a second concurrent user finds it taken and is refused with a MuJoCo warning. The
// other thread owns the handle's error text, so the refused call leaves ck_lastError alone.
class InUse {
 public:
  InUse(ckHandle* ck, const char* fn);
  ~InUse();
  InUse(const InUse&) = delete;
  InUse& operator=(const InUse&) = delete;
  bool ok() const { return ok_; }

 private:
  ckHandle* ck_;
  bool ok_ = false;
};

// a handle for m with validated settings s, without a derivative workspace. Null with a message
// on error.
ckHandle* MakeHandle(const mjModel* m, const ckSettings& s, std::string* error);

// the derivative workspace of ck (setting "derivatives" on), made for m by the first derivative
// call and kept: simulation-only use of a handle never pays for it. False with a message if it
// cannot be made.
bool EnsureDerivative(ckHandle* ck, const mjModel* m, std::string* error);

// MuJoCo's resets of d for a bad state so far (mj_checkPos, mj_checkVel, mj_checkAcc)
int Resets(const mjData* d);

// ck_forwardSkip without the checks of the C API (the derivative's shadow handle)
void ForwardSkip(ckHandle* ck, const mjModel* m, mjData* d, int skipstage, int skipsensor);

// ck_step with MuJoCo's skip stages (mj_stepSkip): skipstage mjSTAGE_POS / mjSTAGE_VEL reuses
// the position / velocity results already in d (and the integrator's factorization, as
// mj_EulerSkip and mj_implicitSkip do); RK4 runs every stage.
void StepSkip(ckHandle* ck, const mjModel* m, mjData* d, int skipstage, int skipsensor);

// make the gap re-check's scratch mjData if the settings ask for it (ck_make, ck_setSettings);
// false if out of memory
bool PrepareRegap(ckHandle* ck, const mjModel* m, const ckSettings& s);

}  // namespace contactkit

#endif  // CONTACTKIT_PLUGIN_HANDLE_H_
