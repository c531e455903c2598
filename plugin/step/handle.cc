// Copyright 2026 The contactkit developers.
//
// ck_make, ck_free, settings on a live handle, statistics.
#include "plugin/step/handle.h"

#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <new>
#include <string>

#include "plugin/config/settings_table.h"
#include "plugin/deriv/derivative.h"
#include "plugin/step/compat.h"
#include "solvers/comfree/comfree.h"
#include "solvers/ipm/ipm.h"
#include "solvers/lcp/lcp.h"

namespace contactkit {
namespace {

// construct and set up the solver named in settings (null for "mujoco")
bool PrepareSolver(ckHandle* ck, const ckSettings& s, std::unique_ptr<Solver>* out,
                   std::string* err) {
  out->reset();
  if (s.solver == ckSOL_MUJOCO) return true;
  std::unique_ptr<Solver> solver = MakeSolver(s.solver);
  if (!solver) {
    *err = std::string("solver '") + ck_solverName(s.solver) +
           "' is not implemented in this build; available: ";
    bool first = true;
    for (int i = 0; i < ckNSOLVER; i++) {
      if (ck_solverAvailable(i)) {
        *err += (first ? "" : ", ") + std::string(ck_solverName(i));
        first = false;
      }
    }
    return false;
  }
  if (!solver->Setup(ck->storage.dims(), s, err)) return false;
  *out = std::move(solver);
  return true;
}

// a 64-bit running hash fed eight bytes at a time (one multiply per word: the check runs in every
// step, so it must cost far less than the step)
class WordHash {
 public:
  void Add(uint64_t x) {
    h_ ^= x * 0x9E3779B97F4A7C15ull;
    h_ = ((h_ << 31) | (h_ >> 33)) * 0xC2B2AE3D27D4EB4Full;
  }
  // n, then a[0..n) two 32-bit values a word
  void Ints(const int* a, int64_t n) {
    Add(static_cast<uint64_t>(n));
    int64_t i = 0;
    for (; i + 1 < n; i += 2) {
      Add(static_cast<uint32_t>(a[i]) | static_cast<uint64_t>(static_cast<uint32_t>(a[i + 1]))
                                            << 32);
    }
    if (i < n) Add(static_cast<uint32_t>(a[i]));
  }
  // one bit a flag, 64 flags a word
  void Bit(bool b) {
    bits_ |= static_cast<uint64_t>(b) << nbit_;
    if (++nbit_ == 64) Flush();
  }
  uint64_t Finish() {
    Flush();
    uint64_t h = h_;
    h ^= h >> 33;
    h *= 0xFF51AFD7ED558CCDull;
    return h ^ (h >> 33);
  }

 private:
  void Flush() {
    if (nbit_ == 0) return;
    Add(bits_ ^ (static_cast<uint64_t>(nbit_) << 56));
    bits_ = 0;
    nbit_ = 0;
  }
  uint64_t h_ = 1469598103934665603ull;
  uint64_t bits_ = 0;
  int nbit_ = 0;
};

}  // namespace

uint64_t ModelFingerprint(const mjModel* m) {
  WordHash h;
  const int64_t sizes[] = {m->nq,      m->nv,       m->nu,        m->na,          m->nbody,
                           m->njnt,    m->ngeom,    m->nsite,     m->nmocap,      m->neq,
                           m->ntendon, m->nwrap,    m->nsensor,   m->nsensordata, m->nM,
                           m->npair,   m->nexclude, m->nuserdata, m->nconmax,     m->njmax};
  for (int64_t x : sizes) h.Add(static_cast<uint64_t>(x));
  // kinematic tree and the mass matrix's sparsity
  h.Ints(m->body_parentid, m->nbody);
  h.Ints(m->body_rootid, m->nbody);
  h.Ints(m->body_jntnum, m->nbody);
  h.Ints(m->body_dofnum, m->nbody);
  h.Ints(m->body_geomnum, m->nbody);
  h.Ints(m->jnt_type, m->njnt);
  h.Ints(m->dof_parentid, m->nv);
  h.Ints(m->dof_bodyid, m->nv);
  h.Ints(m->dof_Madr, m->nv);
  h.Ints(m->geom_type, m->ngeom);
  h.Ints(m->geom_bodyid, m->ngeom);
  h.Ints(m->eq_type, m->neq);
  h.Ints(m->eq_obj1id, m->neq);
  h.Ints(m->eq_obj2id, m->neq);
  h.Ints(m->tendon_num, m->ntendon);
  h.Ints(m->actuator_trntype, m->nu);
  h.Ints(m->actuator_dyntype, m->nu);
  h.Ints(m->actuator_trnid, 2 * m->nu);
  h.Ints(m->sensor_type, m->nsensor);
  h.Ints(m->sensor_dim, m->nsensor);
  h.Ints(m->sensor_adr, m->nsensor);
  h.Ints(m->sensor_objid, m->nsensor);
  // the rows besides contacts that the workspace holds (limits, friction loss)
  for (int i = 0; i < m->njnt; i++) h.Bit(m->jnt_limited[i]);
  for (int i = 0; i < m->ntendon; i++) {
    h.Bit(m->tendon_limited[i]);
    h.Bit(m->tendon_frictionloss[i] > 0);
  }
  for (int i = 0; i < m->nv; i++) h.Bit(m->dof_frictionloss[i] > 0);
  return h.Finish();
}

void SetLastError(ckHandle* ck, const char* fn, const char* fmt, ...) {
  const int n = std::snprintf(ck->error, sizeof(ck->error), "%s: ", fn);
  if (n < 0 || n >= static_cast<int>(sizeof(ck->error))) return;
  va_list args;
  va_start(args, fmt);
  std::vsnprintf(ck->error + n, sizeof(ck->error) - n, fmt, args);
  va_end(args);
}

bool CheckModel(ckHandle* ck, const mjModel* m, const char* fn, bool warn) {
  if (!ck) return false;
  if (!m) {
    SetLastError(ck, fn, "model is NULL");
    return false;
  }
  if (ck_sameModel(ck, m)) return true;
  SetLastError(ck, fn,
               "the handle was made for a different model (sizes or structure differ: nq %d, "
               "nv %d, nbody %d, ngeom %d, nsensordata %d); refused. Make one handle per model "
               "with ck_make.",
               static_cast<int>(m->nq), static_cast<int>(m->nv), static_cast<int>(m->nbody),
               static_cast<int>(m->ngeom), static_cast<int>(m->nsensordata));
  if (warn) WarnOnceMsg(ck, kWarnModel, ck->error);
  return false;
}

bool CheckEntry(ckHandle* ck, const mjModel* m, const mjData* d, const char* fn, bool warn) {
  if (!CheckModel(ck, m, fn, warn)) return false;
  if (!d) {
    SetLastError(ck, fn, "data is NULL");
    return false;
  }
  return true;
}

InUse::InUse(ckHandle* ck, const char* fn) : ck_(ck) {
  if (!ck) return;
  ok_ = !ck->in_use.exchange(true, std::memory_order_acquire);
  if (!ok_) {
    // not WarnOnceMsg: its flags and counter belong to the thread using the handle
    char msg[200];
    std::snprintf(msg, sizeof(msg),
                  "%s: the handle is in use by another thread; refused (use one "
                  "handle per thread)",
                  fn);
    Warn(msg);
  }
}

InUse::~InUse() {
  if (ok_) ck_->in_use.store(false, std::memory_order_release);
}

bool PrepareRegap(ckHandle* ck, const mjModel* m, const ckSettings& s) {
  // one extra mjData for the ipm's gap re-check (its memory is MuJoCo's mjData size)
  if (s.solver != ckSOL_IPM || s.ipm.gap_recheck <= 0 || ck->regap.scratch) return true;
  ck->regap.scratch = mj_makeData(m);
  return ck->regap.scratch != nullptr;
}

void WarnOnceMsg(ckHandle* ck, WarnOnce kind, const char* msg) {
  ck->totals.nwarning++;
  if (ck->warned[kind]) return;
  ck->warned[kind] = true;
  Warn(msg);
}

ckHandle* MakeHandle(const mjModel* m, const ckSettings& s, std::string* err) {
  ckHandle* ck = new (std::nothrow) ckHandle();
  if (!ck) {
    *err = "out of memory";
    return nullptr;
  }
  try {
    if (!ck->extractor.Setup(m, 0, err)) {
      delete ck;
      return nullptr;
    }
    ck->storage.Allocate(ck->extractor.dims(), m->dof_parentid, m->dof_Madr,
                         ck->extractor.dof_tree().data(), ck->extractor.ntree());
    if (!PrepareSolver(ck, s, &ck->solver, err)) {
      delete ck;
      return nullptr;
    }
    if (!PrepareRegap(ck, m, s)) {
      *err = "could not make the mjData of the gap re-check";
      delete ck;
      return nullptr;
    }
    ck->anchors.Allocate(ck->extractor.dims().max_contacts, ck->extractor.dims().max_rows);
    ck->position_fix.assign(m->nv, 0);
    ck->rk.assign(4 * static_cast<size_t>(m->nq + 2 * m->nv + 2 * m->na) + 2 * m->nv + m->na + 1,
                  0);
    ck->adaptive.Setup(m);
    ck->settings = s;
    std::memset(&ck->stats, 0, sizeof(ckStats));
    ck->stats.solver = s.solver;
    ck->fingerprint = ModelFingerprint(m);
  } catch (const std::bad_alloc&) {
    *err = "out of memory";
    delete ck;
    return nullptr;
  }
  return ck;
}

bool EnsureDerivative(ckHandle* ck, const mjModel* m, std::string* err) {
  if (ck->deriv) return true;
  auto deriv = std::make_unique<Derivative>();
  bool ok = false;
  try {
    ok = deriv->Setup(m, ck->settings, err);
  } catch (const std::bad_alloc&) {
    *err = "out of memory";
  }
  if (!ok) return false;
  deriv->set_owner(ck);
  ck->deriv = std::move(deriv);
  return true;
}

}  // namespace contactkit

ckHandle_::ckHandle_() = default;
ckHandle_::~ckHandle_() {
  if (regap.scratch) mj_deleteData(regap.scratch);
}

extern "C" {

ckHandle* ck_make(const mjModel* m, const ckSettings* settings, char* error, int error_sz) {
  using namespace contactkit;
  if (error && error_sz > 0) error[0] = 0;
  if (!m) {
    SetError(error, error_sz, "ck_make: model is NULL");
    return nullptr;
  }

  // settings: given, or from the model's plugin tag / <custom> fields, or defaults
  ckSettings s;
  if (settings) {
    if (ck_validateSettings(settings, error, error_sz) != 0) return nullptr;
    s = *settings;
  } else if (ck_settingsFromModel(m, &s, error, error_sz) < 0) {
    return nullptr;
  }
  std::string err;
  ckHandle* ck = MakeHandle(m, s, &err);
  if (!ck) SetError(error, error_sz, "ck_make: " + err);
  return ck;
}

void ck_free(ckHandle* ck) { delete ck; }

int ck_setSettings(ckHandle* ck, const mjModel* m, const ckSettings* settings, char* error,
                   int error_sz) {
  using namespace contactkit;
  if (error && error_sz > 0) error[0] = 0;
  if (!ck || !settings) {
    SetError(error, error_sz, "ck_setSettings: handle and settings must not be NULL");
    return -1;
  }
  InUse guard(ck, "ck_setSettings");
  if (!guard.ok()) {
    SetError(error, error_sz, "ck_setSettings: the handle is in use by another thread");
    return -1;
  }
  auto fail = [&](const std::string& msg) {
    SetLastError(ck, "ck_setSettings", "%s", msg.c_str());
    SetError(error, error_sz, ck->error);
    return -1;
  };
  if (m && !CheckModel(ck, m, "ck_setSettings", false)) {
    SetError(error, error_sz, ck->error);
    return -1;
  }
  char verr[512];
  if (ck_validateSettings(settings, verr, sizeof(verr)) != 0) return fail(verr);
  std::string err;

  // a new solver, or lcp's dense workspace re-sized (max_island_rows is its size)
  const bool switch_solver = settings->solver != ck->settings.solver;
  const bool rebuild =
      switch_solver || (settings->solver == ckSOL_LCP &&
                        settings->lcp.max_island_rows != ck->settings.lcp.max_island_rows);
  std::unique_ptr<Solver> solver;
  if (rebuild && !PrepareSolver(ck, *settings, &solver, &err)) return fail(err);

  // the derivative workspace follows `derivatives`: a made one takes the new settings, or is
  // freed when turned off (one not made yet is made by the first derivative call)
  if (ck->deriv && settings->deriv.enabled && !ck->deriv->SetSettings(m, *settings, &err)) {
    return fail(err);
  }
  const bool regap = settings->solver == ckSOL_IPM && settings->ipm.gap_recheck > 0;
  if (regap && !ck->regap.scratch && !m) {
    return fail("turning gap_recheck on needs the model (m is NULL)");
  }
  if (m && !PrepareRegap(ck, m, *settings)) {
    return fail("could not make the mjData of the gap re-check");
  }
  if (switch_solver || !settings->comfree.anchor) ck->anchors.Clear();
  if (rebuild) {
    ck->solver = std::move(solver);
  } else if (ck->solver) {
    ck->solver->SetSettings(*settings);
  }
  if (!settings->deriv.enabled) ck->deriv.reset();
  ck->settings = *settings;
  ck->error[0] = 0;
  return 0;
}

void ck_reset(ckHandle* ck) {
  contactkit::InUse guard(ck, "ck_reset");
  if (!guard.ok()) return;
  if (ck->solver) ck->solver->Reset();
  ck->anchors.Clear();
  ck->position_pending = false;
  ck->adaptive.Reset();
}

void ck_getSettings(const ckHandle* ck, ckSettings* settings) {
  if (ck && settings) *settings = ck->settings;
}

const ckStats* ck_stats(const ckHandle* ck) { return ck ? &ck->stats : nullptr; }

const ckTotals* ck_totals(const ckHandle* ck) { return ck ? &ck->totals : nullptr; }

int ck_solverInfo(const ckHandle* ck, ckSolverInfo* info) {
  if (!ck || !info) return -1;
  std::memset(info, 0, sizeof(ckSolverInfo));
  info->solver = ck->stats.solver;
  const contactkit::Solver* solver = ck->solver.get();
  if (const contactkit::IpmStats* st = contactkit::IpmSolverStats(solver)) {
    info->ipm_retries = st->retries;
    info->ipm_lifts = st->lifts;
    info->ipm_factorizations = st->factorizations;
    info->ipm_sym_fallbacks = st->sym_fallbacks;
    info->ipm_warm_islands = st->warm_islands;
    info->ipm_rechecks = st->rechecks;
    info->ipm_holds = st->holds;
    info->ipm_dissipated = st->dissipated;
    info->ipm_prox_solved = st->prox_solved;
  } else if (const contactkit::LcpStats* st = contactkit::LcpSolverStats(solver)) {
    info->lcp_pivots = st->pivots;
    info->lcp_guess_tried = st->guess_tried;
    info->lcp_guess_hit = st->guess_tried && st->guess_all_hit;
    info->lcp_budget_spent = st->spent;
  } else if (const contactkit::ComfreeStats* st = contactkit::ComfreeSolverStats(solver)) {
    info->comfree_facets = st->nfacet;
    info->comfree_active = st->nactive;
    info->comfree_capped = st->ncapped;
  }
  return 0;
}

const ckStepInfo* ck_stepInfo(const ckHandle* ck) { return ck ? &ck->adaptive.info() : nullptr; }

const char* ck_lastError(const ckHandle* ck) { return ck ? ck->error : ""; }

int ck_lastFallback(const ckHandle* ck) { return ck ? ck->fallback : ckFALLBACK_NONE; }

int ck_sameModel(const ckHandle* ck, const mjModel* m) {
  return ck && m && contactkit::ModelFingerprint(m) == ck->fingerprint;
}

}  // extern "C"
