// Copyright 2026 The contactkit developers.
//
// Test support: a fixture that fails any test on a MuJoCo warning or error, model loading
// helpers, and a heap-allocation counter.
#ifndef CONTACTKIT_TESTS_SUPPORT_FIXTURE_H_
#define CONTACTKIT_TESTS_SUPPORT_FIXTURE_H_

#include <gtest/gtest.h>
#include <mujoco/mujoco.h>

#include <memory>
#include <string>
#include <vector>

#include "contactkit/contactkit.h"
#include "contactkit/params.h"

namespace contactkit::test {

struct ModelDeleter {
  void operator()(mjModel* m) const { mj_deleteModel(m); }
};
struct DataDeleter {
  void operator()(mjData* d) const { mj_deleteData(d); }
};
struct HandleDeleter {
  void operator()(ckHandle* h) const { ck_free(h); }
};
using ModelPtr = std::unique_ptr<mjModel, ModelDeleter>;
using DataPtr = std::unique_ptr<mjData, DataDeleter>;
using HandlePtr = std::unique_ptr<ckHandle, HandleDeleter>;

// path of a bundled model (mjcf_models/<name>)
std::string BundledModel(const std::string& name);

// path of one of MuJoCo's example models (<CK_MUJOCO_MODELS>/<rel>)
std::string MujocoModel(const std::string& rel);

// path of a real robot model (<CK_SHARED_MODELS>/<rel>), empty if it is absent
std::string SharedModel(const std::string& rel);

// a 1 kg slider on a spring k = 100 N/m (omega = 10 rad/s, timestep 0.01), no gravity, with the
// MJCF text custom (e.g. <custom> fields) after <mujoco>
std::string OscillatorXml(const std::string& custom = "");

// the model field a parameter names (written here independently of the library's own)
mjtNum* ParamFieldOf(mjModel* m, const ckParam& p);
// the parameter to value as ck_paramJac defines it, as a recompiled model holds it: the field and,
// for a mass, inertia or armature, what mj_setConst derives from it
void SetParamValue(mjModel* m, const ckParam& p, mjtNum value);

// true if a file exists
bool FileExists(const std::string& path);

// resident memory of this process in bytes after the allocator returned its free memory (what
// glibc keeps cached from a solver's workspace just freed does not count); -1 if unknown
long ResidentBytes();

// n, or a tenth of it (at least 1) when CK_TEST_QUICK is set (sanitizer runs)
int TestSteps(int n);

// Fails the test on any MuJoCo warning or error raised while it runs (through mju_user_warning,
// mju_user_error, or the mjData warning counters checked by ExpectNoDataWarnings).
class MujocoTest : public ::testing::Test {
 protected:
  void SetUp() override;
  void TearDown() override;

  // load with ck_loadXML; fails the test (returns null) on error
  ModelPtr Load(const std::string& path);

  // load an MJCF string (written to a temporary file) with ck_loadXML
  ModelPtr LoadString(const std::string& xml, std::string* error = nullptr);

  // make a handle; fails the test on error
  HandlePtr Make(const mjModel* m, const ckSettings* settings = nullptr);

  // settings with the given solver and otherwise defaults
  static ckSettings Settings(int solver);

  // every mjData warning counter is zero
  void ExpectNoDataWarnings(const mjData* d);

  // consume expected MuJoCo warnings that contain text; returns how many matched
  int TakeWarnings(const std::string& text);

  std::vector<std::string>& warnings();
};

// dense copy of MuJoCo's constraint Jacobian row i (efc_J, dense or sparse)
std::vector<double> EfcRow(const mjModel* m, const mjData* d, int i);

// counts heap allocations made by this thread between Start and Stop (malloc, new, Eigen)
class AllocationCounter {
 public:
  static bool Available();  // false under sanitizers, which own malloc
  void Start();
  long Stop();
};

}  // namespace contactkit::test

#endif  // CONTACTKIT_TESTS_SUPPORT_FIXTURE_H_
