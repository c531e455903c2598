// Copyright 2026 The contactkit developers.
//
// Settings: defaults, parsing from text, validation, and reading from a model's <custom> fields.
#include <strings.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "contactkit/contactkit.h"
#include "plugin/config/settings_table.h"
#include "plugin/step/compat.h"

namespace contactkit {
namespace {

#define CK_OFF(field) offsetof(ckSettings, field)
constexpr double kInf = HUGE_VAL;

const char* const kSolverNames[ckNSOLVER] = {"mujoco", "ipm", "comfree", "lcp"};
const char* const kIntegratorNames[ckNINTEGRATOR] = {"model", "tsit5", "dopri5"};

// clang-format off
const KeyInfo kKeys[] = {
  {"solver", "common", kKeyName, CK_OFF(solver), 0, 0, false, false, "mujoco",
   "constraint solver: mujoco, ipm, comfree or lcp", kSolverNames, ckNSOLVER},
  {"warmstart", "common", kKeyBool, CK_OFF(warmstart), 0, 1, false, false, "1",
   "warm-start each solve from the previous step's solution"},

  {"kappa_tol", "ipm", kKeyReal, CK_OFF(ipm.kappa_tol), 0, 1, true, true, "1e-10",
   "final complementarity gamma*s (N*s * m/s); small is hard contact and static friction"},
  {"residual_tol", "ipm", kKeyReal, CK_OFF(ipm.residual_tol), 0, 1, true, true, "1e-8",
   "final residual infinity norm of the optimality conditions"},
  {"kappa_grad", "ipm", kKeyReal, CK_OFF(ipm.kappa_grad), 0, 1, true, true, "1e-4",
   "central-path value of gradients (>= kappa_tol; = kappa_tol: exact derivative of the step)"},
  {"max_iter", "ipm", kKeyInt, CK_OFF(ipm.max_iter), 1, 1000, false, false, "50",
   "maximum predictor-corrector iterations per solve"},
  {"gap_recheck", "ipm", kKeyInt, CK_OFF(ipm.gap_recheck), 0, 3, false, false, "0",
   "re-solves with gaps and Jacobians re-measured at q+ (Newton on phi(q+); 0: off)"},
  {"soft_equality", "ipm", kKeyBool, CK_OFF(ipm.soft_equality), 0, 1, false, false, "0",
   "soften equality constraints with their solref/solimp"},
  {"rest_depth", "ipm", kKeyReal, CK_OFF(ipm.rest_depth), 0, 0.01, false, false, "3e-5",
   "depth (m) at which contacts/limits without margin rest, so MuJoCo keeps reporting them"},
  {"recovery_speed", "ipm", kKeyReal, CK_OFF(ipm.recovery_speed), 0, kInf, true, true, "0.1",
   "largest speed (m/s) at which a penetration or violated limit is undone per step"},
  {"semismooth", "ipm", kKeyBool, CK_OFF(ipm.semismooth), 0, 1, false, false, "0",
   "islands every interior attempt leaves inexact: Tresca fixed point, then semismooth Newton"},

  {"stiffness", "comfree", kKeyReal, CK_OFF(comfree.stiffness), 0, 100, true, false, "0.2",
   "k_user: dimensionless stiffness of the impedance update"},
  {"damping", "comfree", kKeyReal, CK_OFF(comfree.damping), 0, 100, false, false, "0.001",
   "d_user: dimensionless damping of the impedance update"},
  {"facets", "comfree", kKeyInt, CK_OFF(comfree.facets), 4, 64, false, false, "4",
   "tangential facet directions per contact, even (4: MuJoCo's pyramid)"},
  {"parallel_min", "comfree", kKeyInt, CK_OFF(comfree.parallel_min), 1, 1e9, false, false, "4096",
   "contacts above which the facet passes run in parallel (OpenMP; did not pay on 2 cores)"},
  {"relax_limit", "comfree", kKeyReal, CK_OFF(comfree.relax_limit), 0, 100, false, false, "2",
   "largest summed velocity correction of the facets on one tree, in full steps (0: off)"},
  {"anchor", "comfree", kKeyBool, CK_OFF(comfree.anchor), 0, 1, false, false, "1",
   "1: position-level stick from contact anchors kept across ck_step (0: the paper's viscous "
   "stick)"},

  {"erp", "lcp", kKeyReal, CK_OFF(lcp.erp), 0, 1, false, false, "1",
   "fraction of a penetration or limit violation corrected per step (1: all within the step)"},
  {"split_impulse", "lcp", kKeyBool, CK_OFF(lcp.split_impulse), 0, 1, false, false, "1",
   "1: penetrations are corrected by a position projection after the step, which adds no "
   "velocity; 0: by the velocity target (Baumgarte)"},
  {"max_correction", "lcp", kKeyReal, CK_OFF(lcp.max_correction), 0, kInf, true, false, "inf",
   "largest speed (m/s; rad/s for limits) at which a violation is corrected"},
  {"slop", "lcp", kKeyReal, CK_OFF(lcp.slop), 0, 1, false, false, "1e-4",
   "penetration (m; rad for limits) that resting contacts keep, so MuJoCo keeps reporting them "
   "(with split_impulse they rest between slop and 2 slop)"},
  {"restitution", "lcp", kKeyReal, CK_OFF(lcp.restitution), 0, 1, false, false, "0",
   "restitution sigma: a contact approaching faster than the threshold leaves at sigma times"},
  {"restitution_threshold", "lcp", kKeyReal, CK_OFF(lcp.restitution_threshold), 0, kInf, false,
   true, "0.01", "approach speed (m/s) below which no bounce is added"},
  {"cfm", "lcp", kKeyReal, CK_OFF(lcp.cfm), 0, 1, false, true, "0",
   "constraint force mixing added to the diagonal of A ((m/s)/(N s))"},
  {"max_pivots", "lcp", kKeyInt, CK_OFF(lcp.max_pivots), 1, 1e9, false, false, "1000",
   "pivots per pivoting run (principal pivoting, Lemke, Dantzig) per island"},
  {"pgs_iter", "lcp", kKeyInt, CK_OFF(lcp.pgs_iter), 1, 1e6, false, false, "200",
   "projected Gauss-Seidel sweeps of the fallback, of a large island's start (sweep_rows) and "
   "of islands above max_island_rows"},
  {"max_solves", "lcp", kKeyInt, CK_OFF(lcp.max_solves), 1, 1e9, false, false, "300",
   "work budget per island and step: factorizations of the island's matrix (O(n^3) each); when "
   "spent, the best answer found is kept and the step reports MAX_ITER or INACCURATE"},
  {"max_island_rows", "lcp", kKeyInt, CK_OFF(lcp.max_island_rows), 1, 1e5, false, false, "400",
   "rows of the largest island solved directly (sized at ck_make); larger ones get Gauss-Seidel"},
  {"max_work", "lcp", kKeyReal, CK_OFF(lcp.max_work), 0, kInf, true, false, "30",
   "work budget of an island's solve in millions of operations (factorizations, pivots, "
   "sweeps), on average: cheaper solves leave credit for up to 30 times more; when spent, as "
   "max_solves (inf: no limit)"},
  {"sweep_rows", "lcp", kKeyInt, CK_OFF(lcp.sweep_rows), 1, 1e9, false, false, "60",
   "islands of at least this many rows whose guess fails start from Gauss-Seidel on the "
   "previous step's impulses and an exact solve of its classification, then pivot; answers not "
   "stabilized"},
  {"schur_rows", "lcp", kKeyInt, CK_OFF(lcp.schur_rows), 0, 1e9, false, false, "8",
   "islands of at least sweep_rows rows with at least this many bilateral rows (equalities, "
   "tendons) solve the LCP of their other rows, the bilateral ones eliminated (0: never)"},
  {"lemke_warm", "lcp", kKeyInt, CK_OFF(lcp.lemke_warm), 0, 3, false, false, "0",
   "islands below sweep_rows with a regular guess run Lemke from its basis before Lemke from "
   "scratch: 1 when the guess's repair fails, 2 before the repair; 3: from large islands' sweep "
   "(0: never)"},
  {"match_points", "lcp", kKeyBool, CK_OFF(lcp.match_points), 0, 1, false, false, "0",
   "a geom pair's several contacts take the warm start of the previous step's contacts nearest "
   "to their points (0: of the contacts in the same place of the pair's list)"},
  {"qp_sweep", "lcp", kKeyBool, CK_OFF(lcp.qp_sweep), 0, 1, false, false, "0",
   "islands of at least sweep_rows rows whose Gauss-Seidel start fails solve the box QP of their "
   "friction bounds frozen at its normals, refrozen until exact, before Lemke's method"},

  {"derivatives", "derivative", kKeyBool, CK_OFF(deriv.enabled), 0, 1, false, false, "1",
   "derivatives allowed; their workspace is made by the first derivative call (0: refused)"},
  {"cfd_width", "derivative", kKeyReal, CK_OFF(deriv.cfd_width), 0, 1, false, false, "0",
   "contacts-from-distance width w_c in meters (0: off)"},
  {"cfd_solimp", "derivative", kKeyReal5, CK_OFF(deriv.cfd_solimp), 0, kInf, false, true,
   "0.01 0.9 0 0.5 2",
   "CFD impedance beyond margin: d at width, d at 0 (0: own), width (0: cfd_width), mid, power"},
  {"elastic_correction", "derivative", kKeyBool, CK_OFF(deriv.elastic_correction), 0, 1, false,
   false, "0", "Nimble's bounce correction of the position Jacobian"},
  {"complementarity_aware", "derivative", kKeyBool, CK_OFF(deriv.complementarity_aware), 0, 1,
   false, false, "0", "complementarity-aware vector-Jacobian products (contact modes of every solver)"},

  {"integrator", "adaptive", kKeyName, CK_OFF(integrator), 0, 0, false, false, "model",
   "ck_step's integrator: model (the model's own), or adaptive steps of tsit5 or dopri5 (solver "
   "mujoco only)", kIntegratorNames, ckNINTEGRATOR},
  {"rtol", "adaptive", kKeyReal, CK_OFF(adaptive.rtol), 0, 1, false, false, "1e-5",
   "relative tolerance of an internal step's error (tsit5, dopri5)"},
  {"atol", "adaptive", kKeyReal, CK_OFF(adaptive.atol), 0, kInf, false, true, "1e-5",
   "absolute tolerance (state units: m, rad, m/s, rad/s, activation)"},
  {"min_step", "adaptive", kKeyReal, CK_OFF(adaptive.min_step), 0, kInf, true, true, "1e-9",
   "smallest internal step (s); below it ck_step stops and leaves the state at its start"},
  {"max_steps", "adaptive", kKeyInt, CK_OFF(adaptive.max_steps), 1, 1e9, false, false, "10000",
   "internal steps (accepted and rejected) per ck_step; beyond it the state is left at the start"},
  {"pcoeff", "adaptive", kKeyReal, CK_OFF(adaptive.pcoeff), 0, 10, false, false, "0.2",
   "proportional coefficient of the PID step-size controller"},
  {"icoeff", "adaptive", kKeyReal, CK_OFF(adaptive.icoeff), 0, 10, false, false, "0.4",
   "integral coefficient of the PID step-size controller"},
  {"dcoeff", "adaptive", kKeyReal, CK_OFF(adaptive.dcoeff), 0, 10, false, false, "0",
   "derivative coefficient of the PID step-size controller"},
};
// clang-format on
constexpr int kNumKeys = sizeof(kKeys) / sizeof(kKeys[0]);

std::string Trim(const char* s) {
  std::string t(s ? s : "");
  const size_t b = t.find_first_not_of(" \t\r\n");
  const size_t e = t.find_last_not_of(" \t\r\n");
  return b == std::string::npos ? std::string() : t.substr(b, e - b + 1);
}

// shortest decimal text that reads back to the same double
std::string ShortestText(double v) {
  char buf[64];
  for (int digits = 6; digits <= 17; digits++) {
    std::snprintf(buf, sizeof(buf), "%.*g", digits, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  return buf;
}

std::string Num(double v) {
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%g", v);
  return buf;
}

// what a key allows, in words
std::string RangeText(const KeyInfo& k) {
  const std::string interval =
      std::string(k.lo_open ? "(" : "[") + Num(k.lo) + ", " + Num(k.hi) + (k.hi_open ? ")" : "]");
  switch (k.type) {
    case kKeyBool:
      return "0 or 1 (or false/true)";
    case kKeyName: {
      std::string text = "one of:";
      for (int i = 0; i < k.nnames; i++) text += std::string(i ? ", " : " ") + k.names[i];
      return text;
    }
    case kKeyInt:
      return std::string("an integer in ") + interval +
             (std::strcmp(k.name, "facets") == 0 ? ", even" : "");
    case kKeyReal:
      return "a number in " + interval;
    case kKeyReal5:
      return "five numbers, each in " + interval;
  }
  return "";
}

bool InRange(const KeyInfo& k, double v) {
  if (std::isnan(v)) return false;
  if (k.lo_open ? !(v > k.lo) : !(v >= k.lo)) return false;
  if (k.hi_open ? !(v < k.hi) : !(v <= k.hi)) return false;
  return true;
}

// parse one number; the whole text must be consumed
bool ParseNumber(const std::string& text, double* out) {
  if (text.empty()) return false;
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(text.c_str(), &end);
  if (errno == ERANGE || end == text.c_str() || *end != '\0') return false;
  *out = v;
  return true;
}

char* Field(ckSettings* s, const KeyInfo& k) { return reinterpret_cast<char*>(s) + k.offset; }
const char* Field(const ckSettings* s, const KeyInfo& k) {
  return reinterpret_cast<const char*>(s) + k.offset;
}

}  // namespace

const KeyInfo* SettingKeys(int* n) {
  if (n) *n = kNumKeys;
  return kKeys;
}

const KeyInfo* FindSettingKey(const char* name) {
  if (!name) return nullptr;
  for (const KeyInfo& k : kKeys) {
    if (std::strcmp(k.name, name) == 0) return &k;
  }
  return nullptr;
}

void SetError(char* error, int error_sz, const std::string& msg) {
  if (error && error_sz > 0) std::snprintf(error, error_sz, "%s", msg.c_str());
}

}  // namespace contactkit

using contactkit::FindSettingKey;
using contactkit::KeyInfo;
using contactkit::SetError;

namespace {

// set one key from text; on error writes a message naming key, value and what is allowed
int SetKey(ckSettings* s, const KeyInfo& k, const char* value_text, std::string* err) {
  using namespace contactkit;
  const std::string v = Trim(value_text);
  auto fail = [&](const std::string& why) {
    *err = "setting '" + std::string(k.name) + "': value '" + v + "' " + why +
           "; allowed: " + RangeText(k);
    return -1;
  };
  switch (k.type) {
    case kKeyName: {
      for (int id = 0; id < k.nnames; id++) {
        if (v == k.names[id]) {
          *reinterpret_cast<int*>(Field(s, k)) = id;
          return 0;
        }
      }
      return fail(std::strcmp(k.name, "solver") == 0 ? "is not a solver"
                                                     : "is not a name it takes");
    }
    case kKeyBool: {
      int b;
      if (v == "1" || v == "true") {
        b = 1;
      } else if (v == "0" || v == "false") {
        b = 0;
      } else {
        return fail("is not a boolean");
      }
      *reinterpret_cast<int*>(Field(s, k)) = b;
      return 0;
    }
    case kKeyInt: {
      double x;
      if (!ParseNumber(v, &x) || x != std::floor(x)) return fail("is not an integer");
      if (!InRange(k, x)) return fail("is out of range");
      if (std::strcmp(k.name, "facets") == 0 && static_cast<long>(x) % 2 != 0) {
        return fail("is odd");
      }
      *reinterpret_cast<int*>(Field(s, k)) = static_cast<int>(x);
      return 0;
    }
    case kKeyReal: {
      double x;
      if (!ParseNumber(v, &x)) return fail("is not a number");
      if (!InRange(k, x)) return fail("is out of range");
      *reinterpret_cast<double*>(Field(s, k)) = x;
      return 0;
    }
    case kKeyReal5: {
      double x[5];
      const char* p = v.c_str();
      for (int i = 0; i < 5; i++) {
        char* end = nullptr;
        x[i] = std::strtod(p, &end);
        if (end == p) return fail("does not hold five numbers");
        if (!InRange(k, x[i])) return fail("has an entry out of range");
        p = end;
      }
      while (*p == ' ' || *p == '\t') p++;
      if (*p) return fail("has more than five numbers");
      std::memcpy(Field(s, k), x, sizeof(x));
      return 0;
    }
  }
  return fail("has an unknown type");
}

std::string KnownKeys() {
  int n;
  const KeyInfo* keys = contactkit::SettingKeys(&n);
  std::string list;
  for (int i = 0; i < n; i++) list += (i ? ", " : "") + std::string(keys[i].name);
  return list;
}

// settings read from a model, remembering where each key came from to name it in messages
struct ModelSettings {
  explicit ModelSettings(ckSettings* s) : settings(s), from(contactkit::kNumKeys) {}

  // set key k from text given at where; false with err on a bad value or a repeated key
  bool Set(const KeyInfo& k, const std::string& text, const std::string& where) {
    std::string& prev = from[&k - contactkit::SettingKeys(nullptr)];
    if (!prev.empty()) {
      err = "setting '" + std::string(k.name) + "' is given twice, by " + prev + " and by " +
            where + "; allowed: once per model (in the plugin tag or in one <custom> field)";
      return false;
    }
    std::string e;
    if (SetKey(settings, k, text.c_str(), &e) != 0) {
      err = where + ": " + e;
      return false;
    }
    prev = where;
    found = true;
    return true;
  }

  // the plugin tag: a registered plugin instance on MuJoCo 3.x, the fields that ck_loadXML made
  // from it on 2.x
  bool ReadPluginTag(const mjModel* m) {
#if CK_MJ3
    using contactkit::kPluginName;
    int n;
    const KeyInfo* keys = contactkit::SettingKeys(&n);
    int first = -1;
    for (int i = 0; i < m->nplugin; i++) {
      const mjpPlugin* p = mjp_getPluginAtSlot(m->plugin[i]);
      if (!p || !p->name || strcasecmp(p->name, kPluginName) != 0) continue;
      if (first >= 0) {
        err = std::string("the model has more than one ") + kPluginName + " instance, " +
              "<instance name=\"" + InstanceName(m, first) + "\"> and <instance name=\"" +
              InstanceName(m, i) + "\">; allowed: one <instance> per model";
        return false;
      }
      first = i;
      for (int j = 0; j < n; j++) {
        const char* value = mj_getPluginConfig(m, i, keys[j].name);
        if (!value || !value[0]) continue;
        if (!Set(keys[j], value, TagSource(InstanceName(m, i), keys[j].name))) return false;
      }
    }
#else
    for (int i = 0; i < m->ntext; i++) {
      if (std::strcmp(m->names + m->name_textadr[i], contactkit::kTagField) != 0) continue;
      const std::string data = m->text_data + m->text_adr[i];
      const size_t bar = data.rfind('|');
      tag_instance = data.substr(0, bar == std::string::npos ? 0 : bar);
      tag_keys = " " + (bar == std::string::npos ? data : data.substr(bar + 1)) + " ";
    }
#endif
    return true;
  }

  // <custom> numeric and text fields "contactkit:<key>"
  bool ReadCustom(const mjModel* m) {
    using contactkit::kCustomPrefix;
    const size_t plen = std::strlen(kCustomPrefix);

    // numeric fields: one value (or five for solimp-like keys); a solver by its id
    for (int i = 0; i < m->nnumeric; i++) {
      const char* name = m->names + m->name_numericadr[i];
      if (std::strncmp(name, kCustomPrefix, plen) != 0) continue;
      const std::string where = "<custom><numeric name=\"" + std::string(name) + "\">";
      const KeyInfo* k = FindSettingKey(name + plen);
      if (!k) return Unknown(where, name + plen);
      const int size = m->numeric_size[i];
      const double* data = m->numeric_data + m->numeric_adr[i];
      std::string text;
      char buf[64];
      for (int j = 0; j < size; j++) {
        std::snprintf(buf, sizeof(buf), "%s", contactkit::ShortestText(data[j]).c_str());
        text += (j ? " " : "") + std::string(buf);
      }
      if (k->type == contactkit::kKeyName && size == 1 && data[0] >= 0 && data[0] < k->nnames &&
          data[0] == std::floor(data[0])) {
        text = k->names[static_cast<int>(data[0])];
      }
      if (!Set(*k, text, where)) return false;
    }

    // text fields: the value as text
    for (int i = 0; i < m->ntext; i++) {
      const char* name = m->names + m->name_textadr[i];
      if (std::strncmp(name, kCustomPrefix, plen) != 0) continue;
      const KeyInfo* k = FindSettingKey(name + plen);
      const bool from_tag =
          tag_keys.find(" " + std::string(name + plen) + " ") != std::string::npos;
      const std::string where = from_tag ? TagSource(tag_instance, name + plen)
                                         : "<custom><text name=\"" + std::string(name) + "\">";
      if (!k) return Unknown(where, name + plen);
      if (!Set(*k, m->text_data + m->text_adr[i], where)) return false;
    }
    return true;
  }

  // msg followed by where the settings it names came from
  std::string WithSources(const std::string& msg) const {
    std::string out = msg;
    int n;
    const KeyInfo* keys = contactkit::SettingKeys(&n);
    for (int i = 0; i < n; i++) {
      if (from[i].empty() || msg.find("'" + std::string(keys[i].name) + "'") == std::string::npos) {
        continue;
      }
      out += "; '" + std::string(keys[i].name) + "' is set by " + from[i];
    }
    return out;
  }

  bool Unknown(const std::string& where, const char* key) {
    err = where + ": unknown setting '" + std::string(key) + "'; known settings: " + KnownKeys();
    return false;
  }

  static std::string TagSource(const std::string& instance, const char* key) {
    return std::string("plugin tag <instance name=\"") + instance + "\"> <config key=\"" + key +
           "\">";
  }

#if CK_MJ3
  static std::string InstanceName(const mjModel* m, int i) {
    const char* name = mj_id2name(m, mjOBJ_PLUGIN, i);
    return name ? name : "";
  }
#endif

  ckSettings* settings;
  std::vector<std::string> from;  // per key: where the model sets it, empty if it does not
  std::string tag_instance;       // 2.x: instance name of the plugin tag
  std::string tag_keys;           // 2.x: " key key ... " set by the plugin tag
  bool found = false;             // the model sets at least one key
  std::string err;                // message of the first error
};

}  // namespace

extern "C" {

void ck_defaultSettings(ckSettings* settings) {
  if (!settings) return;
  std::memset(settings, 0, sizeof(ckSettings));
  int n;
  const KeyInfo* keys = contactkit::SettingKeys(&n);
  std::string err;
  for (int i = 0; i < n; i++) SetKey(settings, keys[i], keys[i].def, &err);
}

int ck_setSetting(ckSettings* settings, const char* key, const char* value, char* error,
                  int error_sz) {
  if (!settings) {
    contactkit::SetError(error, error_sz, "ck_setSetting: settings is NULL");
    return -1;
  }
  const KeyInfo* k = FindSettingKey(key);
  if (!k) {
    contactkit::SetError(
        error, error_sz,
        "unknown setting '" + std::string(key ? key : "") + "'; known settings: " + KnownKeys());
    return -1;
  }
  std::string err;
  if (SetKey(settings, *k, value, &err) != 0) {
    contactkit::SetError(error, error_sz, err);
    return -1;
  }
  // success: no message from an earlier call stays in the buffer
  if (error && error_sz > 0) error[0] = 0;
  return 0;
}

int ck_getSetting(const ckSettings* settings, const char* key, char* buf, int buf_sz) {
  using namespace contactkit;
  const KeyInfo* k = FindSettingKey(key);
  if (!settings || !k || !buf || buf_sz <= 0) return -1;
  const char* f = Field(settings, *k);
  switch (k->type) {
    case kKeyName: {
      const int id = *reinterpret_cast<const int*>(f);
      std::snprintf(buf, buf_sz, "%s", id >= 0 && id < k->nnames ? k->names[id] : "unknown");
      break;
    }
    case kKeyBool:
    case kKeyInt:
      std::snprintf(buf, buf_sz, "%d", *reinterpret_cast<const int*>(f));
      break;
    case kKeyReal:
      std::snprintf(buf, buf_sz, "%s",
                    contactkit::ShortestText(*reinterpret_cast<const double*>(f)).c_str());
      break;
    case kKeyReal5: {
      const double* x = reinterpret_cast<const double*>(f);
      std::snprintf(buf, buf_sz, "%s %s %s %s %s", contactkit::ShortestText(x[0]).c_str(),
                    contactkit::ShortestText(x[1]).c_str(), ShortestText(x[2]).c_str(),
                    contactkit::ShortestText(x[3]).c_str(), ShortestText(x[4]).c_str());
      break;
    }
  }
  return 0;
}

int ck_validateSettings(const ckSettings* settings, char* error, int error_sz) {
  using namespace contactkit;
  int n;
  const KeyInfo* keys = SettingKeys(&n);
  if (!settings) {
    SetError(error, error_sz, "ck_validateSettings: settings is NULL");
    return -1;
  }
  char text[256];
  ckSettings copy = *settings;
  for (int i = 0; i < n; i++) {
    std::string err;
    ck_getSetting(settings, keys[i].name, text, sizeof(text));
    if (keys[i].type == kKeyName) {
      const int id = *reinterpret_cast<const int*>(Field(settings, keys[i]));
      if (id < 0 || id >= keys[i].nnames) {
        SetError(error, error_sz,
                 "setting '" + std::string(keys[i].name) + "': value " + std::to_string(id) +
                     (std::strcmp(keys[i].name, "solver") == 0 ? " is not a solver id"
                                                               : " is not one of its ids") +
                     "; allowed: " + RangeText(keys[i]));
        return -1;
      }
      continue;
    }
    if (keys[i].type == kKeyBool) {
      const int b = *reinterpret_cast<const int*>(Field(settings, keys[i]));
      if (b != 0 && b != 1) {
        SetError(error, error_sz,
                 "setting '" + std::string(keys[i].name) + "': value " + std::to_string(b) +
                     " is not a boolean; allowed: 0 or 1");
        return -1;
      }
      continue;
    }
    if (SetKey(&copy, keys[i], text, &err) != 0) {
      SetError(error, error_sz, err);
      return -1;
    }
  }
  if (settings->ipm.kappa_grad < settings->ipm.kappa_tol) {
    char buf[256];
    std::snprintf(buf, sizeof(buf),
                  "setting 'kappa_grad' = %g is below 'kappa_tol' = %g; allowed: kappa_grad >= "
                  "kappa_tol (gradients are taken on the way down the central path)",
                  settings->ipm.kappa_grad, settings->ipm.kappa_tol);
    SetError(error, error_sz, buf);
    return -1;
  }
  if (settings->integrator != ckINT_MODEL && settings->solver != ckSOL_MUJOCO) {
    SetError(error, error_sz,
             "setting 'integrator' = " + std::string(kIntegratorNames[settings->integrator]) +
                 " with solver " + ck_solverName(settings->solver) +
                 ": the adaptive integrators take the constraint forces as a force law of the "
                 "state, which only solver mujoco (MuJoCo's soft constraints) is; ipm, comfree "
                 "and lcp solve velocity impulses over a step of fixed length; allowed: "
                 "integrator model with every solver, tsit5 or dopri5 with solver mujoco");
    return -1;
  }
  if (settings->adaptive.rtol == 0 && settings->adaptive.atol == 0) {
    SetError(error, error_sz,
             "settings 'rtol' and 'atol' are both 0; allowed: at least one of them > 0");
    return -1;
  }
  return 0;
}

int ck_numSettingKeys(void) { return contactkit::kNumKeys; }

const char* ck_settingKey(int i) {
  return i >= 0 && i < contactkit::kNumKeys ? contactkit::kKeys[i].name : nullptr;
}

const char* ck_settingDoc(int i) {
  return i >= 0 && i < contactkit::kNumKeys ? contactkit::kKeys[i].doc : nullptr;
}

const char* ck_solverName(int solver) {
  return solver >= 0 && solver < ckNSOLVER ? contactkit::kSolverNames[solver] : "unknown";
}

int ck_solverId(const char* name) {
  if (!name) return -1;
  for (int i = 0; i < ckNSOLVER; i++) {
    if (std::strcmp(name, contactkit::kSolverNames[i]) == 0) return i;
  }
  return -1;
}

int ck_settingsFromModel(const mjModel* m, ckSettings* settings, char* error, int error_sz) {
  using namespace contactkit;
  if (!m || !settings) {
    SetError(error, error_sz, "ck_settingsFromModel: model and settings must not be NULL");
    return -1;
  }
  ck_defaultSettings(settings);
  ModelSettings ms(settings);
  if (!ms.ReadPluginTag(m) || !ms.ReadCustom(m)) {
    SetError(error, error_sz, ms.err);
    return -1;
  }
  if (!ms.found) return 0;
  char err[1024];
  if (ck_validateSettings(settings, err, sizeof(err)) != 0) {
    SetError(error, error_sz, ms.WithSources(err));
    return -1;
  }
  return 1;
}

}  // extern "C"
