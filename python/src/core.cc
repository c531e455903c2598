// Copyright 2026 The contactkit developers.
//
// contactkit._core: the C API on the `mujoco` package's own MjModel / MjData. Python passes the
// structs' addresses (MjModel._address); contactkit/__init__.py checks types and shapes first.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <exception>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "contactkit/contactkit.h"

namespace py = pybind11;

namespace {

const mjModel* M(std::uintptr_t a) { return reinterpret_cast<const mjModel*>(a); }
mjData* D(std::uintptr_t a) { return reinterpret_cast<mjData*>(a); }

// data of an optional array (None: NULL) that must be float64, C-contiguous and hold n numbers:
// never a converted copy, which would leave the caller's array unwritten
mjtNum* Buffer(const py::object& a, long n, const char* name, bool write) {
  if (a.is_none()) return nullptr;
  if (!py::isinstance<py::array>(a)) {
    throw py::type_error(std::string(name) + ": expected a numpy array of float64");
  }
  py::array arr = a.cast<py::array>();
  if (!arr.dtype().is(py::dtype::of<mjtNum>()) || !(arr.flags() & py::array::c_style) ||
      (write && !arr.writeable())) {
    throw py::type_error(std::string(name) + ": expected a writeable C-contiguous float64 array");
  }
  if (arr.size() != n) {
    throw py::value_error(std::string(name) + ": expected " + std::to_string(n) + " numbers, got " +
                          std::to_string(arr.size()));
  }
  return write ? static_cast<mjtNum*>(arr.mutable_data())
               : const_cast<mjtNum*>(static_cast<const mjtNum*>(arr.data()));
}

// settings from text pairs on top of base; throws ValueError with the C message
void Apply(ckSettings* s, const py::dict& kv) {
  char err[1024];
  for (const auto& item : kv) {
    const std::string key = py::str(item.first), value = py::str(item.second);
    if (ck_setSetting(s, key.c_str(), value.c_str(), err, sizeof(err)) != 0) {
      throw py::value_error(err);
    }
  }
}

class Handle {
 public:
  // settings from the model, then the given keys on top (none given: exactly ck_make(m, NULL))
  Handle(std::uintptr_t m, const py::dict& settings) {
    char err[1024] = "";
    if (settings.empty()) {
      ck_ = ck_make(M(m), nullptr, err, sizeof(err));
    } else {
      ckSettings s;
      ck_defaultSettings(&s);
      if (ck_settingsFromModel(M(m), &s, err, sizeof(err)) < 0) throw py::value_error(err);
      Apply(&s, settings);
      ck_ = ck_make(M(m), &s, err, sizeof(err));
    }
    if (!ck_) throw py::value_error(err);
  }
  ~Handle() { ck_free(ck_); }
  ckHandle* get() const { return ck_; }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;

  void Step(std::uintptr_t m, std::uintptr_t d, int nstep) {
    py::gil_scoped_release release;
    for (int i = 0; i < nstep; i++) ck_step(ck_, M(m), D(d));
  }
  void Forward(std::uintptr_t m, std::uintptr_t d) {
    py::gil_scoped_release release;
    ck_forward(ck_, M(m), D(d));
  }
  void Reset() { ck_reset(ck_); }
  std::string LastError() const { return ck_lastError(ck_); }
  bool SameModel(std::uintptr_t m) const { return ck_sameModel(ck_, M(m)); }
  int LastFallback() const { return ck_lastFallback(ck_); }

  // every setting as text
  py::dict Settings() const {
    ckSettings s;
    ck_getSettings(ck_, &s);
    py::dict out;
    char buf[256];
    for (int i = 0; i < ck_numSettingKeys(); i++) {
      if (ck_getSetting(&s, ck_settingKey(i), buf, sizeof(buf)) == 0) out[ck_settingKey(i)] = buf;
    }
    return out;
  }

  // the handle's settings with the given keys changed; the handle keeps its own on error
  void Set(std::uintptr_t m, const py::dict& kv) {
    ckSettings s;
    ck_getSettings(ck_, &s);
    Apply(&s, kv);
    char err[1024] = "";
    if (ck_setSettings(ck_, M(m), &s, err, sizeof(err)) != 0) throw py::value_error(err);
  }

  py::dict Stats() const {
    const ckStats* st = ck_stats(ck_);
    py::dict o;
    o["solver"] = ck_solverName(st->solver);
    o["status"] = st->status;
    o["iterations"] = st->iterations;
    o["nrow"] = st->nrow;
    o["ncon"] = st->ncon;
    o["nisland"] = st->nisland;
    o["residual"] = st->residual;
    o["kappa"] = st->kappa;
    o["condition"] = st->condition;
    o["max_penetration"] = st->max_penetration;
    o["solve_time"] = st->solve_time;
    return o;
  }

  py::dict Totals() const {
    const ckTotals* t = ck_totals(ck_);
    py::dict o;
    o["solves"] = t->solves;
    o["inexact"] = t->inexact;
    o["guess_hits"] = t->guess_hits;
    o["guess_tries"] = t->guess_tries;
    o["nwarning"] = t->nwarning;
    return o;
  }

  py::dict StepInfo() const {
    static const char* const kIntegrators[] = {"model", "tsit5", "dopri5"};
    static const char* const kStatus[] = {"ok", "max_steps", "min_step"};
    const ckStepInfo* in = ck_stepInfo(ck_);
    py::dict o;
    o["integrator"] = kIntegrators[in->integrator];
    o["status"] = kStatus[in->status];
    o["accepted"] = in->accepted;
    o["rejected"] = in->rejected;
    o["min_step"] = in->min_step;
    o["max_step"] = in->max_step;
    o["error"] = in->error;
    o["next_step"] = in->next_step;
    return o;
  }

  py::dict SolverInfo() const {
    ckSolverInfo in;
    ck_solverInfo(ck_, &in);
    py::dict o;
    o["solver"] = ck_solverName(in.solver);
    switch (in.solver) {
      case ckSOL_IPM:
        o["retries"] = in.ipm_retries;
        o["lifts"] = in.ipm_lifts;
        o["factorizations"] = in.ipm_factorizations;
        o["sym_fallbacks"] = in.ipm_sym_fallbacks;
        o["warm_islands"] = in.ipm_warm_islands;
        o["rechecks"] = in.ipm_rechecks;
        o["holds"] = in.ipm_holds;
        o["dissipated"] = in.ipm_dissipated;
        o["prox_solved"] = in.ipm_prox_solved;
        break;
      case ckSOL_LCP:
        o["pivots"] = in.lcp_pivots;
        o["guess_tried"] = static_cast<bool>(in.lcp_guess_tried);
        o["guess_hit"] = static_cast<bool>(in.lcp_guess_hit);
        o["budget_spent"] = in.lcp_budget_spent;
        break;
      case ckSOL_COMFREE:
        o["facets"] = in.comfree_facets;
        o["active"] = in.comfree_active;
        o["capped"] = in.comfree_capped;
        break;
      default:
        break;
    }
    return o;
  }

  // the four Jacobian outputs of m's sizes (each nullable)
  struct Jacobians {
    mjtNum *a, *b, *c, *d;
  };
  static Jacobians Outputs(const mjModel* m, const py::object& A, const py::object& B,
                           const py::object& C, const py::object& Dm) {
    const long nx = 2 * m->nv + m->na, nu = m->nu, ns = m->nsensordata;
    return {Buffer(A, nx * nx, "A", true), Buffer(B, nx * nu, "B", true),
            Buffer(C, ns * nx, "C", true), Buffer(Dm, ns * nu, "D", true)};
  }

  int TransitionJac(std::uintptr_t m, std::uintptr_t d, py::object A, py::object B, py::object C,
                    py::object Dm) {
    const Jacobians j = Outputs(M(m), A, B, C, Dm);
    py::gil_scoped_release release;
    return ck_transitionJac(ck_, M(m), D(d), j.a, j.b, j.c, j.d);
  }
  int TransitionJacAware(std::uintptr_t m, std::uintptr_t d, py::object dx, py::object A,
                         py::object B, py::object C, py::object Dm) {
    const Jacobians j = Outputs(M(m), A, B, C, Dm);
    const mjtNum* x = Buffer(dx, 2 * M(m)->nv + M(m)->na, "dx", false);
    py::gil_scoped_release release;
    return ck_transitionJacAware(ck_, M(m), D(d), x, j.a, j.b, j.c, j.d);
  }
  int TransitionVJP(std::uintptr_t m, std::uintptr_t d, py::object dx, py::object ds, py::object gx,
                    py::object gu) {
    const long nx = 2 * M(m)->nv + M(m)->na, nu = M(m)->nu, ns = M(m)->nsensordata;
    const mjtNum* x = Buffer(dx, nx, "dx", false);
    const mjtNum* s = Buffer(ds, ns, "ds", false);
    mjtNum* ox = Buffer(gx, nx, "gx", true);
    mjtNum* ou = Buffer(gu, nu, "gu", true);
    py::gil_scoped_release release;
    return ck_transitionVJP(ck_, M(m), D(d), x, s, ox, ou);
  }
  // ck_paramJac: params as (kind, id, index); DxDp, DsDp float64 and how int32 arrays of the
  // right sizes
  int ParamJac(std::uintptr_t m, std::uintptr_t d, const std::vector<std::tuple<int, int, int>>& p,
               py::object dxdp, py::object dsdp, py::array_t<int, py::array::c_style> how) {
    const long np = static_cast<long>(p.size()), nx = 2 * M(m)->nv + M(m)->na;
    std::vector<ckParam> params(p.size());
    for (size_t k = 0; k < p.size(); k++) {
      params[k] = {std::get<0>(p[k]), std::get<1>(p[k]), std::get<2>(p[k])};
    }
    mjtNum* x = Buffer(dxdp, nx * np, "DxDp", true);
    mjtNum* s = Buffer(dsdp, M(m)->nsensordata * np, "DsDp", true);
    if (how.size() != np) throw py::value_error("how: expected one entry per parameter");
    int* h = how.mutable_data();
    py::gil_scoped_release release;
    return ck_paramJac(ck_, M(m), D(d), params.data(), static_cast<int>(np), x, s, h);
  }
  // ck_rolloutGrad with a Python loss: loss(t) -> (value, dx or None, ds or None); an exception
  // in loss ends the rollout (the loss reports NaN) and is raised again here
  struct LossCall {
    py::function fn;
    long nx, ns;
    std::exception_ptr error;
  };
  static mjtNum CallLoss(void* user, int t, const mjModel*, const mjData*, mjtNum* dx, mjtNum* ds) {
    LossCall& call = *static_cast<LossCall*>(user);
    py::gil_scoped_acquire acquire;
    try {
      py::tuple r = call.fn(t).cast<py::tuple>();
      const mjtNum* x = Buffer(r[1], call.nx, "dx", false);
      const mjtNum* s = Buffer(r[2], call.ns, "ds", false);
      if (x) std::copy(x, x + call.nx, dx);
      if (s && ds) std::copy(s, s + call.ns, ds);
      return r[0].cast<double>();
    } catch (...) {
      call.error = std::current_exception();
      return NAN;
    }
  }
  // ck_rolloutGrad, or ck_rolloutGradParam when params are given (gp float64 and how int32
  // arrays of one entry per parameter)
  int RolloutGrad(std::uintptr_t m, std::uintptr_t d, int nstep, py::object ctrl, py::function loss,
                  py::object value, py::object gx, py::object gu,
                  const std::vector<std::tuple<int, int, int>>& p, py::object gp, py::object how) {
    const long nx = 2 * M(m)->nv + M(m)->na, nu = M(m)->nu, np = static_cast<long>(p.size());
    const mjtNum* c = Buffer(ctrl, static_cast<long>(nstep) * nu, "ctrl", false);
    mjtNum* v = Buffer(value, 1, "value", true);
    mjtNum* ox = Buffer(gx, nx, "gx", true);
    mjtNum* ou = Buffer(gu, static_cast<long>(nstep) * nu, "gu", true);
    std::vector<ckParam> params(p.size());
    for (size_t k = 0; k < p.size(); k++) {
      params[k] = {std::get<0>(p[k]), std::get<1>(p[k]), std::get<2>(p[k])};
    }
    mjtNum* op = np ? Buffer(gp, np, "gp", true) : nullptr;
    int* h = nullptr;
    if (np && !how.is_none()) {
      auto a = how.cast<py::array_t<int, py::array::c_style>>();
      if (a.size() != np) throw py::value_error("how: expected one entry per parameter");
      h = a.mutable_data();
    }
    LossCall call{loss, nx, M(m)->nsensordata, nullptr};
    int rc;
    {
      py::gil_scoped_release release;
      rc = np ? ck_rolloutGradParam(ck_, M(m), D(d), nstep, c, &CallLoss, &call, params.data(),
                                    static_cast<int>(np), v, ox, ou, op, h)
              : ck_rolloutGrad(ck_, M(m), D(d), nstep, c, &CallLoss, &call, v, ox, ou);
    }
    if (call.error) std::rethrow_exception(call.error);
    return rc;
  }
  int TransitionFD(std::uintptr_t m, std::uintptr_t d, double eps, bool centered, py::object A,
                   py::object B, py::object C, py::object Dm) {
    const Jacobians j = Outputs(M(m), A, B, C, Dm);
    py::gil_scoped_release release;
    return ck_transitionFD(ck_, M(m), D(d), eps, centered ? 1 : 0, j.a, j.b, j.c, j.d);
  }

 private:
  ckHandle* ck_ = nullptr;
};

}  // namespace

// ck_rollout on float64 C-contiguous arrays whose sizes contactkit/_rollout.py checked
void Rollout(std::uintptr_t m, const std::vector<Handle*>& handles,
             const std::vector<std::uintptr_t>& datas, int nroll, int nstep, int control_spec,
             py::object state0, py::object warmstart0, py::object control, py::object state,
             py::object sensordata) {
  const mjModel* model = M(m);
  const long nstate = mj_stateSize(model, mjSTATE_FULLPHYSICS);
  const long ncontrol = mj_stateSize(model, control_spec);
  const long n = static_cast<long>(nroll) * nstep;
  const mjtNum* s0 = Buffer(state0, nroll * nstate, "initial_state", false);
  const mjtNum* w0 =
      Buffer(warmstart0, static_cast<long>(nroll) * model->nv, "initial_warmstart", false);
  const mjtNum* u = Buffer(control, n * ncontrol, "control", false);
  mjtNum* so = Buffer(state, n * nstate, "state", true);
  mjtNum* sd = Buffer(sensordata, n * model->nsensordata, "sensordata", true);
  if (handles.size() != datas.size() || handles.empty()) {
    throw py::value_error("rollout: one handle per data is needed");
  }
  std::vector<ckHandle*> hs;
  std::vector<mjData*> ds;
  for (size_t k = 0; k < handles.size(); k++) {
    hs.push_back(handles[k]->get());
    ds.push_back(D(datas[k]));
  }
  char err[1024] = "";
  int rc;
  {
    py::gil_scoped_release release;
    rc = ck_rollout(model, hs.data(), ds.data(), static_cast<int>(hs.size()), nroll, nstep,
                    control_spec, s0, w0, u, so, sd, err, sizeof(err));
  }
  if (rc != 0) throw py::value_error(err);
}

PYBIND11_MODULE(_core, mod) {
  mod.doc() = "contactkit's C API on mujoco.MjModel / mujoco.MjData addresses (internal)";
  mod.attr("mujoco_version_built") = mj_versionString();
  mod.attr("version") = ckVERSION;
  mod.def("mujoco_version_loaded", [] { return std::string(mj_versionString()); });
  mod.def("setting_keys", [] {
    py::list out;
    for (int i = 0; i < ck_numSettingKeys(); i++) {
      out.append(py::make_tuple(ck_settingKey(i), ck_settingDoc(i)));
    }
    return out;
  });
  mod.def("solver_available", [](const std::string& name) {
    const int id = ck_solverId(name.c_str());
    return id >= 0 && ck_solverAvailable(id) == 1;
  });
  mod.def("settings_from_model", [](std::uintptr_t m) {
    ckSettings s;
    char err[1024] = "";
    if (ck_settingsFromModel(M(m), &s, err, sizeof(err)) < 0) throw py::value_error(err);
    py::dict out;
    char buf[256];
    for (int i = 0; i < ck_numSettingKeys(); i++) {
      if (ck_getSetting(&s, ck_settingKey(i), buf, sizeof(buf)) == 0) out[ck_settingKey(i)] = buf;
    }
    return out;
  });
  mod.def("fallback_texts", [] {
    py::list out;
    for (int i = 0; ck_fallbackText(i); i++) out.append(ck_fallbackText(i));
    return out;
  });
  mod.def("rollout", &Rollout);
  mod.def("parse_param", [](std::uintptr_t m, const std::string& text) {
    ckParam p;
    char err[2048];
    if (ck_parseParam(M(m), text.c_str(), &p, err, sizeof(err)) != 0) throw py::value_error(err);
    return py::make_tuple(p.kind, p.id, p.index);
  });
  mod.def("check_param", [](std::uintptr_t m, int kind, int id, int index) {
    const ckParam p{kind, id, index};
    char err[2048];
    if (ck_checkParam(M(m), &p, err, sizeof(err)) != 0) throw py::value_error(err);
  });
  mod.def("state_size", [](std::uintptr_t m, int spec) { return mj_stateSize(M(m), spec); });
  py::class_<Handle>(mod, "Handle")
      .def(py::init<std::uintptr_t, const py::dict&>())
      .def("step", &Handle::Step)
      .def("forward", &Handle::Forward)
      .def("reset", &Handle::Reset)
      .def("last_error", &Handle::LastError)
      .def("same_model", &Handle::SameModel)
      .def("last_fallback", &Handle::LastFallback)
      .def("settings", &Handle::Settings)
      .def("set", &Handle::Set)
      .def("stats", &Handle::Stats)
      .def("totals", &Handle::Totals)
      .def("solver_info", &Handle::SolverInfo)
      .def("step_info", &Handle::StepInfo)
      .def("transition_jac", &Handle::TransitionJac)
      .def("transition_jac_aware", &Handle::TransitionJacAware)
      .def("transition_vjp", &Handle::TransitionVJP)
      .def("rollout_grad", &Handle::RolloutGrad)
      .def("transition_fd", &Handle::TransitionFD)
      .def("param_jac", &Handle::ParamJac);
}
