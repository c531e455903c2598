// Copyright 2026 The contactkit developers.
//
// What a ckHandle holds: settings, statistics, the problem storage, the selected solver and the
// integrator's scratch, all allocated by ck_make / ck_setSettings.
#ifndef CONTACTKIT_PLUGIN_HANDLE_H_
#define CONTACTKIT_PLUGIN_HANDLE_H_

#include <memory>
#include <string>
#include <vector>

#include "contactkit/contactkit.h"
#include "plugin/anchor.h"
#include "plugin/extract.h"
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
  ckSettings settings;                            // current settings
  ckStats stats;                                  // statistics of the last forward pass
  int nq = 0, nv = 0, na = 0, nu = 0, nbody = 0;  // sizes of the model the handle was made for
  contactkit::Extractor extractor;                // model structure and capacities
  contactkit::ProblemStorage storage;             // problem and solution arrays
  std::unique_ptr<contactkit::Solver> solver;     // null for the "mujoco" pass-through
  std::vector<double> rk;                         // RK4 stages: X (4 x nq+nv+na), F (4 x nv+na), dX
  contactkit::Anchors anchors;                    // comfree contact anchors (comfree.anchor)
  std::vector<double> position_fix;               // pseudo-velocity for after the step    (nv)
  bool position_pending = false;                  // position_fix holds this step's correction
  bool hold_stage = false;                        // RK4 stages after the first: record nothing
  bool warned[contactkit::kNumWarnOnce] = {};     // warn-once flags
  ckRegap_ regap;                                 // gap re-check context (ipm gap_recheck > 0)
  std::unique_ptr<contactkit::Derivative> deriv;  // derivative workspace (plugin/derivative.h)

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

// a handle for m with validated settings s; with_derivative also allocates the derivative
// workspace. Null with a message on error.
ckHandle* MakeHandle(const mjModel* m, const ckSettings& s, bool with_derivative,
                     std::string* error);

// ck_step with MuJoCo's skip stages (mj_stepSkip): skipstage mjSTAGE_POS / mjSTAGE_VEL reuses
// the position / velocity results already in d (and the integrator's factorization, as
// mj_EulerSkip and mj_implicitSkip do); RK4 runs every stage.
void StepSkip(ckHandle* ck, const mjModel* m, mjData* d, int skipstage, int skipsensor);

// make the gap re-check's scratch mjData if the settings ask for it (ck_make, ck_setSettings);
// false if out of memory
bool PrepareRegap(ckHandle* ck, const mjModel* m, const ckSettings& s);

}  // namespace contactkit

#endif  // CONTACTKIT_PLUGIN_HANDLE_H_
