// Copyright 2026 The contactkit developers.
#include "support/fixture.h"

#include <malloc.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>

namespace contactkit::test {
namespace {

std::mutex g_mutex;
std::vector<std::string> g_warnings;

void OnWarning(const char* msg) {
  std::lock_guard<std::mutex> lock(g_mutex);
  g_warnings.emplace_back(msg);
}

void OnError(const char* msg) {
  // MuJoCo continues after a user error handler returns: stop here
  std::fprintf(stderr, "MuJoCo error: %s\n", msg);
  ADD_FAILURE() << "MuJoCo error: " << msg;
  std::abort();
}

}  // namespace

std::string BundledModel(const std::string& name) {
  return std::string(CK_SOURCE_DIR) + "/mjcf_models/" + name;
}

std::string MujocoModel(const std::string& rel) {
  return std::string(CK_MUJOCO_MODELS) + "/" + rel;
}

std::string SharedModel(const std::string& rel) {
  std::string path = std::string(CK_SHARED_MODELS) + "/" + rel;
  return FileExists(path) ? path : std::string();
}

std::string OscillatorXml(const std::string& custom) {
  return "<mujoco>" + custom + R"(
  <option timestep="0.01" gravity="0 0 0"/>
  <worldbody>
    <body>
      <joint type="slide" axis="1 0 0" stiffness="100"/>
      <geom type="sphere" size="0.1" mass="1" contype="0" conaffinity="0"/>
    </body>
  </worldbody>
</mujoco>)";
}

bool FileExists(const std::string& path) { return access(path.c_str(), R_OK) == 0; }

long ResidentBytes() {
  malloc_trim(0);
  long pages = 0, resident = 0;
  FILE* f = std::fopen("/proc/self/statm", "r");
  if (!f) return -1;
  const int n = std::fscanf(f, "%ld %ld", &pages, &resident);
  std::fclose(f);
  return n == 2 ? resident * sysconf(_SC_PAGESIZE) : -1;
}

int TestSteps(int n) {
  const char* quick = std::getenv("CK_TEST_QUICK");
  return quick && quick[0] && quick[0] != '0' ? (n / 10 > 0 ? n / 10 : 1) : n;
}

void MujocoTest::SetUp() {
  std::lock_guard<std::mutex> lock(g_mutex);
  g_warnings.clear();
  mju_user_warning = OnWarning;
  mju_user_error = OnError;
}

void MujocoTest::TearDown() {
  std::lock_guard<std::mutex> lock(g_mutex);
  for (const std::string& w : g_warnings) ADD_FAILURE() << "MuJoCo warning: " << w;
  g_warnings.clear();
  mju_user_warning = nullptr;
  mju_user_error = nullptr;
}

std::vector<std::string>& MujocoTest::warnings() { return g_warnings; }

int MujocoTest::TakeWarnings(const std::string& text) {
  std::lock_guard<std::mutex> lock(g_mutex);
  int n = 0;
  for (auto it = g_warnings.begin(); it != g_warnings.end();) {
    if (it->find(text) != std::string::npos) {
      it = g_warnings.erase(it);
      n++;
    } else {
      ++it;
    }
  }
  return n;
}

ModelPtr MujocoTest::Load(const std::string& path) {
  char error[1024] = "";
  mjModel* m = ck_loadXML(path.c_str(), nullptr, error, sizeof(error));
  EXPECT_NE(m, nullptr) << "loading " << path << ": " << error;
  return ModelPtr(m);
}

ModelPtr MujocoTest::LoadString(const std::string& xml, std::string* error_out) {
  char error[1024] = "";
  mjModel* m = ck_loadXMLString(xml.c_str(), error, sizeof(error));
  if (error_out) {
    *error_out = error;
  } else {
    EXPECT_NE(m, nullptr) << error;
  }
  return ModelPtr(m);
}

HandlePtr MujocoTest::Make(const mjModel* m, const ckSettings* settings) {
  char error[1024] = "";
  ckHandle* h = ck_make(m, settings, error, sizeof(error));
  EXPECT_NE(h, nullptr) << error;
  return HandlePtr(h);
}

ckSettings MujocoTest::Settings(int solver) {
  ckSettings s;
  ck_defaultSettings(&s);
  s.solver = solver;
  return s;
}

std::vector<double> EfcRow(const mjModel* m, const mjData* d, int i) {
  std::vector<double> row(m->nv, 0.0);
  if (mj_isSparse(m)) {
    for (int k = 0; k < d->efc_J_rownnz[i]; k++) {
      row[d->efc_J_colind[d->efc_J_rowadr[i] + k]] = d->efc_J[d->efc_J_rowadr[i] + k];
    }
  } else {
    for (int k = 0; k < m->nv; k++) row[k] = d->efc_J[i * m->nv + k];
  }
  return row;
}

void MujocoTest::ExpectNoDataWarnings(const mjData* d) {
  for (int i = 0; i < mjNWARNING; i++) {
    EXPECT_EQ(d->warning[i].number, 0) << "mjData warning " << i << " raised";
  }
}

mjtNum* ParamFieldOf(mjModel* m, const ckParam& p) {
  switch (p.kind) {
    case ckPARAM_BODY_MASS:
      return m->body_mass + p.id;
    case ckPARAM_BODY_IPOS:
      return m->body_ipos + 3 * p.id + p.index;
    case ckPARAM_BODY_INERTIA:
      return m->body_inertia + 3 * p.id + p.index;
    case ckPARAM_GEOM_FRICTION:
      return m->geom_friction + 3 * p.id + p.index;
    case ckPARAM_GEOM_SIZE:
      return m->geom_size + 3 * p.id + p.index;
    case ckPARAM_GEOM_POS:
      return m->geom_pos + 3 * p.id + p.index;
    case ckPARAM_GEOM_SOLREF:
      return m->geom_solref + mjNREF * p.id + p.index;
    case ckPARAM_GEOM_SOLIMP:
      return m->geom_solimp + mjNIMP * p.id + p.index;
    case ckPARAM_DOF_DAMPING:
      return m->dof_damping + p.id;
    case ckPARAM_DOF_ARMATURE:
      return m->dof_armature + p.id;
    case ckPARAM_JNT_STIFFNESS:
      return m->jnt_stiffness + p.id;
    case ckPARAM_DOF_FRICTIONLOSS:
      return m->dof_frictionloss + p.id;
    case ckPARAM_ACTUATOR_GAINPRM:
      return m->actuator_gainprm + mjNGAIN * p.id + p.index;
    case ckPARAM_ACTUATOR_BIASPRM:
      return m->actuator_biasprm + mjNBIAS * p.id + p.index;
    default:
      return m->opt.gravity + p.index;
  }
}

void SetParamValue(mjModel* m, const ckParam& p, mjtNum value) {
  *ParamFieldOf(m, p) = value;
  if (p.kind == ckPARAM_BODY_MASS || p.kind == ckPARAM_BODY_INERTIA ||
      p.kind == ckPARAM_DOF_ARMATURE) {
    DataPtr d(mj_makeData(m));
    mj_setConst(m, d.get());
  }
}

}  // namespace contactkit::test
