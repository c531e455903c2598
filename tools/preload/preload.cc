// Copyright 2026 The contactkit developers.
//
// libcontactkit_preload.so: contactkit's solvers inside an unmodified MuJoCo program.
//
//   LD_PRELOAD=libcontactkit_preload.so CONTACTKIT_SOLVER=ipm ./program model.xml
//
// MuJoCo's forward pass (mj_forwardSkip, mj_step2, and through them mj_step, mj_forward,
// mj_RungeKutta and mjd_transitionFD) calls mj_fwdConstraint through the dynamic linker when
// MuJoCo is a shared library that does not bind it internally (Debian's does not). This library
// defines mj_fwdConstraint, so the dynamic linker resolves those calls here; we run contactkit's
// constraint stage on (m, d) with one ckHandle per mjData, and call MuJoCo's own function (found
// with dlsym(RTLD_NEXT)) for the "mujoco" solver. mj_deleteData and mj_deleteModel are wrapped to
// free the handles; mjd_transitionFD is wrapped to offer contactkit's analytic Jacobians.
//
// Environment:
//   CONTACTKIT_SOLVER=NAME            solver for every model (mujoco, ipm, comfree, lcp)
//   CONTACTKIT_SETTINGS="k=v k=v"     settings for every model (commas or spaces between pairs)
//   CONTACTKIT_DERIVATIVES=analytic   program's mjd_transitionFD calls return contactkit's
//                                     analytic Jacobians (default "fd": MuJoCo's finite
//                                     differences, which step through the interposed solver)
//   CONTACTKIT_REPORT=1               a line per mjData on stderr when it is deleted (or at exit)
//   CONTACTKIT_QUIET=1                no messages except errors
// The model's own settings (<custom> fields contactkit:<key>, see docs/mjcf.md) come first; the
// environment overrides them key by key. A model and environment naming nothing run MuJoCo's
// solver.
#include <dlfcn.h>

#include <atomic>
#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "contactkit/contactkit.h"
#include "plugin/step/compat.h"
#include "plugin/step/handle.h"
#include "tools/preload/elf_check.h"

namespace contactkit::preload {
namespace {

using FwdConstraintFn = void (*)(const mjModel*, mjData*);
using DeleteDataFn = void (*)(mjData*);
using DeleteModelFn = void (*)(mjModel*);
using TransitionFDFn = void (*)(const mjModel*, mjData*, mjtNum, mjtByte, mjtNum*, mjtNum*, mjtNum*,
                                mjtNum*);

// MuJoCo's own functions, the next definitions after ours
struct Real {
  FwdConstraintFn fwd_constraint = nullptr;
  DeleteDataFn delete_data = nullptr;
  DeleteModelFn delete_model = nullptr;
  TransitionFDFn transition_fd = nullptr;
};

// process-wide configuration from the environment, read once at load
struct Config {
  std::vector<std::pair<std::string, std::string>> settings;  // key, value overrides
  bool analytic = false;                                      // CONTACTKIT_DERIVATIVES=analytic
  bool report = false;                                        // CONTACTKIT_REPORT=1
  bool quiet = false;                                         // CONTACTKIT_QUIET=1
  bool disabled = false;  // bad environment or interposition impossible: pass everything through
};

// what the shim keeps per mjData
struct Entry {
  ckHandle* ck = nullptr;      // null: this model runs MuJoCo's solver (error or by choice)
  const mjModel* m = nullptr;  // model the handle was made for
  int nq = 0, nv = 0, nbody = 0, ngeom = 0, njmax = 0, nconmax = 0;  // its shape
  int index = 0;                                                     // order of first sight
  int solver = ckSOL_MUJOCO;
  long solves = 0;              // constraint stages run
  double max_penetration = 0;   // deepest contact seen (m)
  double last_penetration = 0;  // deepest contact of the last solve (m): the resting depth
  double contacts = 0;          // sum of contacts over solves
  double solve_time = 0;        // wall time in the constraint stage (s)
};

// process-wide state, allocated once and never destroyed: MuJoCo calls may still arrive while
// static destructors run at exit, and the report at exit needs the entries
struct State {
  std::mutex mutex;  // guards entries and next_index
  std::unordered_map<const mjData*, std::unique_ptr<Entry>> entries;
  int next_index = 0;
};
State& S() {
  static State* state = new State;
  return *state;
}

Real g_real;  // set at load (constant-initialized: no static constructor runs after ours)
Config& Cfg() {
  static Config* config = new Config;
  return *config;
}
std::atomic<long> g_total_solves{0};
std::atomic<int> g_selftest_hits{0};
thread_local int t_depth = 0;  // >0 inside our mj_fwdConstraint
thread_local bool t_selftest = false;

void Message(const char* fmt, ...) {
  char buf[2048];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  std::fprintf(stderr, "contactkit preload: %s\n", buf);
}

// a message printed once per process, however many models or mjData raise it
void MessageOnce(const std::string& msg) {
  static std::mutex* mu = new std::mutex;
  static std::vector<std::string>* seen = new std::vector<std::string>;
  std::lock_guard<std::mutex> lock(*mu);
  for (const std::string& s : *seen) {
    if (s == msg) return;
  }
  seen->push_back(msg);
  Message("%s", msg.c_str());
}

const char* Env(const char* name) {
  const char* v = std::getenv(name);
  return v && *v ? v : nullptr;
}

bool EnvFlag(const char* name) {
  const char* v = Env(name);
  return v && std::strcmp(v, "0") != 0 && std::strcmp(v, "false") != 0;
}

// parse CONTACTKIT_SOLVER / CONTACTKIT_SETTINGS, checking every pair on default settings
bool ParseEnvironment(Config* c, std::string* error) {
  if (const char* text = Env("CONTACTKIT_SETTINGS")) {
    std::string s = text;
    for (char& ch : s) {
      if (ch == ',' || ch == ';' || ch == '\t' || ch == '\n') ch = ' ';
    }
    size_t pos = 0;
    while (pos < s.size()) {
      const size_t end = s.find(' ', pos);
      const std::string item = s.substr(pos, end == std::string::npos ? end : end - pos);
      pos = end == std::string::npos ? s.size() : end + 1;
      if (item.empty()) continue;
      const size_t eq = item.find('=');
      if (eq == std::string::npos || eq == 0) {
        *error = "CONTACTKIT_SETTINGS: '" + item +
                 "' is not KEY=VALUE (e.g. \"solver=ipm kappa_tol=1e-8\")";
        return false;
      }
      c->settings.emplace_back(item.substr(0, eq), item.substr(eq + 1));
    }
  }
  if (const char* solver = Env("CONTACTKIT_SOLVER")) c->settings.emplace_back("solver", solver);

  ckSettings s;
  ck_defaultSettings(&s);
  char err[512];
  for (const auto& kv : c->settings) {
    if (ck_setSetting(&s, kv.first.c_str(), kv.second.c_str(), err, sizeof(err)) != 0) {
      *error =
          std::string(kv.first == "solver" && Env("CONTACTKIT_SOLVER") ? "CONTACTKIT_SOLVER"
                                                                       : "CONTACTKIT_SETTINGS") +
          ": " + err;
      return false;
    }
  }
  if (const char* deriv = Env("CONTACTKIT_DERIVATIVES")) {
    if (std::strcmp(deriv, "analytic") == 0) {
      c->analytic = true;
    } else if (std::strcmp(deriv, "fd") != 0) {
      *error =
          std::string("CONTACTKIT_DERIVATIVES: unknown value '") + deriv +
          "'; allowed: fd (MuJoCo's finite differences through the contactkit solver), analytic";
      return false;
    }
  }
  return true;
}

// settings for model m: the model's own, then the environment's
bool SettingsFor(const mjModel* m, ckSettings* s, std::string* error) {
  char err[1024];
  if (ck_settingsFromModel(m, s, err, sizeof(err)) < 0) {
    *error = std::string("model settings: ") + err;
    return false;
  }
  for (const auto& kv : Cfg().settings) {
    if (ck_setSetting(s, kv.first.c_str(), kv.second.c_str(), err, sizeof(err)) != 0) {
      *error = err;
      return false;
    }
  }
  if (ck_validateSettings(s, err, sizeof(err)) != 0) {
    *error = err;
    return false;
  }
  return true;
}

bool SameShape(const Entry& e, const mjModel* m) {
  return e.m == m && e.nq == m->nq && e.nv == m->nv && e.nbody == m->nbody && e.ngeom == m->ngeom &&
         e.njmax == m->njmax && e.nconmax == m->nconmax;
}

void Report(const Entry& e) {
  if (!Cfg().report || e.solves == 0) return;
  Message(
      "mjData #%d: %ld constraint solves by %s, max penetration %.3g m, final penetration "
      "%.3g m, %.3g contacts per solve, %.3g ms per solve",
      e.index, e.solves, ck_solverName(e.solver), e.max_penetration, e.last_penetration,
      e.contacts / static_cast<double>(e.solves),
      1e3 * e.solve_time / static_cast<double>(e.solves));
}

// make (or remake) the handle of an entry for model m; called with the state's mutex held
void Prepare(Entry* e, const mjModel* m) {
  ck_free(e->ck);
  e->ck = nullptr;
  e->m = m;
  e->nq = m->nq;
  e->nv = m->nv;
  e->nbody = m->nbody;
  e->ngeom = m->ngeom;
  e->njmax = m->njmax;
  e->nconmax = m->nconmax;
  e->solver = ckSOL_MUJOCO;
  ckSettings s;
  std::string err;
  if (!SettingsFor(m, &s, &err)) {
    MessageOnce(err + "; this model runs MuJoCo's own solver");
    return;
  }
  char cerr[1024];
  e->ck = ck_make(m, &s, cerr, sizeof(cerr));
  if (!e->ck) {
    MessageOnce(std::string(cerr) + "; this model runs MuJoCo's own solver");
    return;
  }
  e->solver = s.solver;
}

// the entry of d, made on first sight and remade when d is used with another model
Entry* Lookup(const mjModel* m, const mjData* d) {
  State& st = S();
  std::lock_guard<std::mutex> lock(st.mutex);
  std::unique_ptr<Entry>& slot = st.entries[d];
  if (!slot) {
    slot = std::make_unique<Entry>();
    slot->index = st.next_index++;
    Prepare(slot.get(), m);
  } else if (!SameShape(*slot, m)) {
    Report(*slot);
    const int index = slot->index;
    ck_free(slot->ck);
    *slot = Entry();
    slot->index = index;
    Prepare(slot.get(), m);
  }
  return slot.get();
}

// can a definition of mj_fwdConstraint here replace MuJoCo's in this process?
bool CheckInterposition(std::string* why) {
  Dl_info info;
  if (!g_real.fwd_constraint || !dladdr(reinterpret_cast<void*>(g_real.fwd_constraint), &info) ||
      !info.dli_fname) {
    *why = "no shared libmujoco with mj_fwdConstraint is loaded";
    return false;
  }
  std::string err;
  const int has = HasDynamicRelocation(info.dli_fname, "mj_fwdConstraint", &err);
  if (has == 0) {
    *why = std::string(info.dli_fname) +
           " binds mj_fwdConstraint internally (no dynamic relocation for it)";
    return false;
  }
  if (has < 0)
    Message("cannot inspect %s (%s); relying on the self-test", info.dli_fname, err.c_str());

  // self-test: a forward pass on a one-box model must reach our mj_fwdConstraint
  static const char kXml[] =
      "<mujoco><worldbody><geom type='plane' size='1 1 .1'/><body pos='0 0 .09'>"
      "<freejoint/><geom type='box' size='.1 .1 .1'/></body></worldbody></mujoco>";
  // (loading runs a forward pass too: the flag covers every pass of the self-test)
  t_selftest = true;
  char lerr[256] = "";
  mjModel* m = ck_loadXMLString(kXml, lerr, sizeof(lerr));
  if (!m) {
    t_selftest = false;
    *why = std::string("self-test model did not load: ") + lerr;
    return false;
  }
  mjData* d = mj_makeData(m);
  mj_forward(m, d);
  t_selftest = false;
  g_real.delete_data(d);
  g_real.delete_model(m);
  if (g_selftest_hits.load() == 0) {
    *why = std::string(info.dli_fname) +
           " did not call the interposed mj_fwdConstraint in a "
           "self-test forward pass";
    return false;
  }
  return true;
}

__attribute__((constructor)) void Init() {
  g_real.fwd_constraint = reinterpret_cast<FwdConstraintFn>(dlsym(RTLD_NEXT, "mj_fwdConstraint"));
  g_real.delete_data = reinterpret_cast<DeleteDataFn>(dlsym(RTLD_NEXT, "mj_deleteData"));
  g_real.delete_model = reinterpret_cast<DeleteModelFn>(dlsym(RTLD_NEXT, "mj_deleteModel"));
  g_real.transition_fd = reinterpret_cast<TransitionFDFn>(dlsym(RTLD_NEXT, "mjd_transitionFD"));
  Cfg().quiet = EnvFlag("CONTACTKIT_QUIET");
  Cfg().report = EnvFlag("CONTACTKIT_REPORT");

  std::string err;
  if (!ParseEnvironment(&Cfg(), &err)) {
    Message("%s; every model runs MuJoCo's own solver", err.c_str());
    Cfg().disabled = true;
    return;
  }
  std::string why;
  if (!CheckInterposition(&why)) {
    Message(
        "cannot replace the constraint solver in this program: %s. MuJoCo's own solver runs "
        "unchanged. Build against a shared MuJoCo that calls mj_fwdConstraint through the "
        "dynamic linker (as Debian's does), or call ck_step from the program.",
        why.c_str());
    Cfg().disabled = true;
    return;
  }
  if (Cfg().report && !Cfg().quiet) {
    std::string s;
    for (const auto& kv : Cfg().settings) s += " " + kv.first + "=" + kv.second;
    Message(
        "active (libmujoco calls mj_fwdConstraint through the dynamic linker); environment "
        "settings:%s",
        s.empty() ? " none (models' own settings, else MuJoCo's solver)" : s.c_str());
  }
}

// the report of mjData still alive at exit (their handles are left to the process' end)
__attribute__((destructor)) void Fini() {
  State& st = S();
  std::lock_guard<std::mutex> lock(st.mutex);
  for (auto& kv : st.entries) Report(*kv.second);
  if (Cfg().report && !Cfg().disabled) {
    Message("%ld constraint solves in this process", g_total_solves.load());
  }
}

}  // namespace
}  // namespace contactkit::preload

using contactkit::preload::Entry;
using contactkit::preload::g_real;

extern "C" {

__attribute__((visibility("default"))) void mj_fwdConstraint(const mjModel* m, mjData* d) {
  using namespace contactkit::preload;
  if (t_selftest) g_selftest_hits++;
  // MuJoCo's solver: when interposition is off, for the self-test, and when our constraint stage
  // runs the "mujoco" pass-through (it calls mj_fwdConstraint, which resolves here again)
  if (Cfg().disabled || t_selftest || t_depth > 0 || !g_real.fwd_constraint) {
    if (g_real.fwd_constraint) g_real.fwd_constraint(m, d);
    return;
  }
  Entry* e = Lookup(m, d);
  if (!e->ck) {
    g_real.fwd_constraint(m, d);
    return;
  }
  t_depth++;
  contactkit::ConstraintStage(e->ck, m, d);
  t_depth--;
  const ckStats* st = ck_stats(e->ck);
  e->solves++;
  e->contacts += st->ncon;
  e->solve_time += st->solve_time;
  if (st->max_penetration > e->max_penetration) e->max_penetration = st->max_penetration;
  e->last_penetration = st->max_penetration;
  g_total_solves++;
}

__attribute__((visibility("default"))) void mj_deleteData(mjData* d) {
  using namespace contactkit::preload;
  if (d) {
    std::unique_ptr<Entry> e;
    {
      State& st = S();
      std::lock_guard<std::mutex> lock(st.mutex);
      auto it = st.entries.find(d);
      if (it != st.entries.end()) {
        e = std::move(it->second);
        st.entries.erase(it);
      }
    }
    if (e) {
      Report(*e);
      ck_free(e->ck);
    }
  }
  if (g_real.delete_data) g_real.delete_data(d);
}

__attribute__((visibility("default"))) void mj_deleteModel(mjModel* m) {
  using namespace contactkit::preload;
  if (m) {
    // handles made for m are remade if an mjData is used with a new model at the same address
    State& st = S();
    std::lock_guard<std::mutex> lock(st.mutex);
    for (auto& kv : st.entries) {
      if (kv.second->m == m) kv.second->m = nullptr;
    }
  }
  if (g_real.delete_model) g_real.delete_model(m);
}

__attribute__((visibility("default"))) void mjd_transitionFD(const mjModel* m, mjData* d,
                                                             mjtNum eps,
                                                             contactkit::CenteredFlag centered,
                                                             mjtNum* A, mjtNum* B, mjtNum* C,
                                                             mjtNum* D) {
  using namespace contactkit::preload;
  // analytic Jacobians of A and B when asked for, available, and no sensor Jacobians are wanted
  if (Cfg().analytic && !Cfg().disabled && !C && !D) {
    Entry* e = Lookup(m, d);
    if (e->ck && ck_transitionJac(e->ck, m, d, A, B, nullptr, nullptr) == 0) return;
  }
  g_real.transition_fd(m, d, eps, centered, A, B, C, D);
}

}  // extern "C"
