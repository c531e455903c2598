// Copyright 2026 The contactkit developers.
//
// ck_make, ck_free, settings on a live handle, statistics.
#include "plugin/handle.h"

#include <cstdio>
#include <cstring>
#include <new>
#include <string>

#include "plugin/compat.h"
#include "plugin/derivative.h"

namespace contactkit {
namespace {

void SetError(char* error, int error_sz, const std::string& msg) {
  if (error && error_sz > 0) std::snprintf(error, error_sz, "%s", msg.c_str());
}

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

}  // namespace

bool PrepareRegap(ckHandle* ck, const mjModel* m, const ckSettings& s) {
  // one extra mjData for the ipm's gap re-check (its memory is MuJoCo's mjData size)
  if (s.solver != ckSOL_IPM || s.ipm.gap_recheck <= 0 || ck->regap.scratch) return true;
  ck->regap.scratch = mj_makeData(m);
  return ck->regap.scratch != nullptr;
}

void WarnOnceMsg(ckHandle* ck, WarnOnce kind, const char* msg) {
  ck->stats.nwarning++;
  if (ck->warned[kind]) return;
  ck->warned[kind] = true;
  Warn(msg);
}

ckHandle* MakeHandle(const mjModel* m, const ckSettings& s, bool with_derivative,
                     std::string* err) {
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
    ck->settings = s;
    std::memset(&ck->stats, 0, sizeof(ckStats));
    ck->stats.solver = s.solver;
    ck->nq = m->nq;
    ck->nv = m->nv;
    ck->na = m->na;
    ck->nu = m->nu;
    ck->nbody = m->nbody;
    if (with_derivative) {
      ck->deriv = std::make_unique<Derivative>();
      if (!ck->deriv->Setup(m, s, err)) {
        delete ck;
        return nullptr;
      }
      ck->deriv->set_anchor_source(&ck->anchors);
    }
  } catch (const std::bad_alloc&) {
    *err = "out of memory";
    delete ck;
    return nullptr;
  }
  return ck;
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
  ckHandle* ck = MakeHandle(m, s, s.deriv.enabled != 0, &err);
  if (!ck) SetError(error, error_sz, "ck_make: " + err);
  return ck;
}

void ck_free(ckHandle* ck) { delete ck; }

int ck_setSettings(ckHandle* ck, const mjModel* m, const ckSettings* settings, char* error,
                   int error_sz) {
  using namespace contactkit;
  if (!ck || !settings) {
    SetError(error, error_sz, "ck_setSettings: handle and settings must not be NULL");
    return -1;
  }
  if (ck_validateSettings(settings, error, error_sz) != 0) return -1;
  std::string err;
  const bool switch_solver = settings->solver != ck->settings.solver;
  std::unique_ptr<Solver> solver;
  if (switch_solver && !PrepareSolver(ck, *settings, &solver, &err)) {
    SetError(error, error_sz, "ck_setSettings: " + err);
    return -1;
  }
  // the derivative workspace follows `derivatives`: made here when turned on, freed when off
  std::unique_ptr<Derivative> deriv;
  if (settings->deriv.enabled && !ck->deriv) {
    if (!m) {
      SetError(error, error_sz,
               "ck_setSettings: turning derivatives on needs the model (m is NULL)");
      return -1;
    }
    deriv = std::make_unique<Derivative>();
    bool ok = false;
    try {
      ok = deriv->Setup(m, *settings, &err);
    } catch (const std::bad_alloc&) {
      err = "out of memory";
    }
    if (!ok) {
      SetError(error, error_sz, "ck_setSettings: " + err);
      return -1;
    }
    deriv->set_anchor_source(&ck->anchors);
  } else if (ck->deriv && settings->deriv.enabled && !ck->deriv->SetSettings(m, *settings, &err)) {
    SetError(error, error_sz, "ck_setSettings: " + err);
    return -1;
  }
  if (m && !PrepareRegap(ck, m, *settings)) {
    SetError(error, error_sz, "ck_setSettings: could not make the mjData of the gap re-check");
    return -1;
  }
  if (switch_solver || !settings->comfree.anchor) ck->anchors.Clear();
  if (switch_solver) {
    ck->solver = std::move(solver);
  } else if (ck->solver) {
    ck->solver->SetSettings(*settings);
  }
  if (deriv) ck->deriv = std::move(deriv);
  if (!settings->deriv.enabled) ck->deriv.reset();
  ck->settings = *settings;
  return 0;
}

void ck_reset(ckHandle* ck) {
  if (!ck) return;
  if (ck->solver) ck->solver->Reset();
  ck->anchors.Clear();
  ck->position_pending = false;
}

void ck_getSettings(const ckHandle* ck, ckSettings* settings) { *settings = ck->settings; }

const ckStats* ck_stats(const ckHandle* ck) { return &ck->stats; }

}  // extern "C"
