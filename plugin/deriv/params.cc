// Copyright 2026 The contactkit developers.
//
// Parameter Jacobians of a step (ck_paramJac): the parameter table and parsing, the model copy,
// the analytic directions' set-up (SmoothTangent::ParamTangent, then the stage's force and
// integrator tangents as for a state direction: directions.cc) and the central-difference
// fallback through ck_step on the copy.
#include <mujoco/mjxmacro.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>

#include "plugin/deriv/derivative.h"
#include "plugin/step/compat.h"
#include "plugin/step/handle.h"

namespace contactkit {
namespace {

constexpr double kParamFdStep = 1e-6;  // central differences of ck_step, relative to 1 + |p|

// one kind: how it is spelled, what it addresses, how many components, analytic or not
struct KindInfo {
  const char* object;  // first token
  const char* field;   // third token
  int objtype;         // mjOBJ_* of the name (mjOBJ_UNKNOWN: gravity)
  bool analytic;       // through the smooth dynamics' tangent (else central differences)
};

// in ckParamKind's order
constexpr KindInfo kKinds[ckNPARAMKIND] = {
    {"body", "mass", mjOBJ_BODY, true},
    {"body", "ipos", mjOBJ_BODY, true},
    {"body", "inertia", mjOBJ_BODY, true},
    {"geom", "friction", mjOBJ_GEOM, false},
    {"geom", "size", mjOBJ_GEOM, false},
    {"geom", "pos", mjOBJ_GEOM, false},
    {"geom", "solref", mjOBJ_GEOM, true},
    {"geom", "solimp", mjOBJ_GEOM, true},
    {"dof", "damping", mjOBJ_DOF, true},
    {"dof", "armature", mjOBJ_DOF, true},
    {"joint", "stiffness", mjOBJ_JOINT, true},
    {"dof", "frictionloss", mjOBJ_DOF, false},
    {"actuator", "gainprm", mjOBJ_ACTUATOR, true},
    {"actuator", "biasprm", mjOBJ_ACTUATOR, true},
    {"gravity", "", mjOBJ_UNKNOWN, true},
};

constexpr const char* kKindNames[ckNPARAMKIND] = {
    "body:mass",       "body:ipos",        "body:inertia",     "geom:friction",    "geom:size",
    "geom:pos",        "geom:solref",      "geom:solimp",      "dof:damping",      "dof:armature",
    "joint:stiffness", "dof:frictionloss", "actuator:gainprm", "actuator:biasprm", "gravity"};

constexpr const char* kSyntax =
    "supported: body:NAME:mass, body:NAME:ipos:I, body:NAME:inertia:I, geom:NAME:friction:I, "
    "geom:NAME:size:I, geom:NAME:pos:I, geom:NAME:solref:I, geom:NAME:solimp:I, "
    "dof:ID:damping, dof:ID:armature, dof:ID:frictionloss (ID: a dof id, or a joint name with I "
    "its dof), joint:NAME:stiffness, joint:NAME:damping[:I], joint:NAME:armature[:I], "
    "joint:NAME:frictionloss[:I], actuator:NAME:gainprm:I, actuator:NAME:biasprm:I, gravity:I "
    "(NAME: a name or an id; I: a component, default 0)";

void Message(char* error, int error_sz, const char* fmt, ...) __attribute__((format(printf, 3, 4)));
void Message(char* error, int error_sz, const char* fmt, ...) {
  if (!error || error_sz <= 0) return;
  va_list args;
  va_start(args, fmt);
  vsnprintf(error, error_sz, fmt, args);
  va_end(args);
}

// objects and components of a kind in m
int ObjectCount(const mjModel* m, int kind) {
  switch (kKinds[kind].objtype) {
    case mjOBJ_BODY:
      return m->nbody;
    case mjOBJ_GEOM:
      return m->ngeom;
    case mjOBJ_DOF:
      return m->nv;
    case mjOBJ_JOINT:
      return m->njnt;
    case mjOBJ_ACTUATOR:
      return m->nu;
    default:
      return 1;
  }
}

int ComponentCount(int kind) {
  switch (kind) {
    case ckPARAM_BODY_IPOS:
    case ckPARAM_BODY_INERTIA:
    case ckPARAM_GEOM_FRICTION:
    case ckPARAM_GEOM_SIZE:
    case ckPARAM_GEOM_POS:
    case ckPARAM_GRAVITY:
      return 3;
    case ckPARAM_GEOM_SOLREF:
      return mjNREF;
    case ckPARAM_GEOM_SOLIMP:
      return mjNIMP;
    case ckPARAM_ACTUATOR_GAINPRM:
      return mjNGAIN;
    case ckPARAM_ACTUATOR_BIASPRM:
      return mjNBIAS;
    default:
      return 1;
  }
}

// a whole token as a non-negative integer, or -1
int ParseIndex(const std::string& s) {
  if (s.empty() || s.size() > 9) return -1;
  for (char c : s) {
    if (c < '0' || c > '9') return -1;
  }
  return std::atoi(s.c_str());
}

// fields of the model's assets (meshes, skins, height fields, textures, bounding volumes): large,
// read by nothing the parameters change, and kept from ck_make's copy
bool AssetField(const char* name) {
  for (const char* prefix : {"mesh_", "skin_", "hfield_", "tex_", "bvh_", "oct_"}) {
    if (std::strncmp(name, prefix, std::strlen(prefix)) == 0) return true;
  }
  return false;
}

}  // namespace

void ConstCache::Setup(const mjModel* m) {
  // each field of m's buffer but its assets, adjacent ones merged (the model's layout is fixed)
  ranges_.clear();
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-variable"
  MJMODEL_POINTERS_PREAMBLE(m)
#define X(type, name, nr, nc)                                                      \
  if (!AssetField(#name) && m->nr * (nc) > 0) {                                    \
    const size_t at = static_cast<size_t>(reinterpret_cast<const char*>(m->name) - \
                                          static_cast<const char*>(m->buffer));    \
    const size_t n = sizeof(type) * static_cast<size_t>(m->nr) * (nc);             \
    if (!ranges_.empty() && ranges_.back().first + ranges_.back().second == at) {  \
      ranges_.back().second += n;                                                  \
    } else {                                                                       \
      ranges_.push_back({at, n});                                                  \
    }                                                                              \
  }
  MJMODEL_POINTERS
#undef X
#pragma GCC diagnostic pop
  bytes_ = sizeof(mjOption) + sizeof(mjStatistic);
  for (const auto& r : ranges_) bytes_ += r.second;
  base_.clear();
  entries_.clear();
}

// mj_copyModel would copy megabytes of meshes per call (a Panda: 30 ms)
void ConstCache::Sync(mjModel* dst, const mjModel* src) const {
  dst->opt = src->opt;
  dst->vis = src->vis;
  dst->stat = src->stat;
  char* to = static_cast<char*>(dst->buffer);
  const char* from = static_cast<const char*>(src->buffer);
  for (const auto& r : ranges_) std::memcpy(to + r.first, from + r.first, r.second);
}

void ConstCache::Save(const mjModel* m, unsigned char* out) const {
  std::memcpy(out, &m->opt, sizeof(mjOption));
  std::memcpy(out + sizeof(mjOption), &m->stat, sizeof(mjStatistic));
  out += sizeof(mjOption) + sizeof(mjStatistic);
  const char* from = static_cast<const char*>(m->buffer);
  for (const auto& r : ranges_) {
    std::memcpy(out, from + r.first, r.second);
    out += r.second;
  }
}

bool ConstCache::Check(const mjModel* base) {
  if (!base_.empty()) {
    const unsigned char* at = base_.data();
    bool same = std::memcmp(at, &base->opt, sizeof(mjOption)) == 0 &&
                std::memcmp(at + sizeof(mjOption), &base->stat, sizeof(mjStatistic)) == 0;
    at += sizeof(mjOption) + sizeof(mjStatistic);
    const char* from = static_cast<const char*>(base->buffer);
    for (size_t i = 0; same && i < ranges_.size(); i++) {
      same = std::memcmp(at, from + ranges_[i].first, ranges_[i].second) == 0;
      at += ranges_[i].second;
    }
    if (same) return true;
  }
  // a new fill (allocates only the first time: the sizes are the model's)
  base_.resize(bytes_);
  Save(base, base_.data());
  entries_.clear();
  return false;
}

bool ConstCache::Load(mjModel* mp, const mjtNum* field, mjtNum value) const {
  for (size_t e = 0; e < entries_.size(); e++) {
    if (entries_[e].field != field || entries_[e].value != value) continue;
    const unsigned char* at = store_.data() + e * bytes_;
    std::memcpy(&mp->opt, at, sizeof(mjOption));
    std::memcpy(&mp->stat, at + sizeof(mjOption), sizeof(mjStatistic));
    at += sizeof(mjOption) + sizeof(mjStatistic);
    char* to = static_cast<char*>(mp->buffer);
    for (const auto& r : ranges_) {
      std::memcpy(to + r.first, at, r.second);
      at += r.second;
    }
    return true;
  }
  return false;
}

void ConstCache::Store(const mjModel* mp, const mjtNum* field, mjtNum value) {
  // Check fills base_ first; past kMaxBytes mj_setConst runs each time
  if (base_.empty() || (entries_.size() + 1) * bytes_ > kMaxBytes) return;
  store_.resize(std::max(store_.size(), (entries_.size() + 1) * bytes_));
  Save(mp, store_.data() + entries_.size() * bytes_);
  entries_.push_back({field, value});
}

// mj_setConst follows parameters of this kind
bool ParamKindDerived(int kind) {
  return kind == ckPARAM_BODY_MASS || kind == ckPARAM_BODY_INERTIA || kind == ckPARAM_DOF_ARMATURE;
}

bool ParamKindAnalytic(int kind) {
  return kind >= 0 && kind < ckNPARAMKIND && kKinds[kind].analytic;
}

bool Derivative::ParamAnalytic(int k) const {
  // a derived parameter moves the rows' regularizer through invweight0 (ParamTangent's dR, as
  // one ratio per contact): MuJoCo's own pyramids of condim 4 and 6 mix the translational and
  // rotational weights in one row, those columns by differences
  const int kind = param_.params[k].kind;
  if (!ParamKindAnalytic(kind)) return false;
  if (!ParamKindDerived(kind) || !stage_.has_rows || stage_.solver ||
      param_model_->opt.cone != mjCONE_PYRAMIDAL)
    return true;
  const Problem& p = *stage_.problem;
  for (int c = 0; c < p.ncon; c++) {
    if (p.con[c].dim > 3) return false;
  }
  return true;
}

// the field a parameter names in m (checked by ck_checkParam)
mjtNum* ParamField(mjModel* m, const ckParam& p) {
  const int i = p.id, k = p.index;
  switch (p.kind) {
    case ckPARAM_BODY_MASS:
      return m->body_mass + i;
    case ckPARAM_BODY_IPOS:
      return m->body_ipos + 3 * i + k;
    case ckPARAM_BODY_INERTIA:
      return m->body_inertia + 3 * i + k;
    case ckPARAM_GEOM_FRICTION:
      return m->geom_friction + 3 * i + k;
    case ckPARAM_GEOM_SIZE:
      return m->geom_size + 3 * i + k;
    case ckPARAM_GEOM_POS:
      return m->geom_pos + 3 * i + k;
    case ckPARAM_GEOM_SOLREF:
      return m->geom_solref + mjNREF * i + k;
    case ckPARAM_GEOM_SOLIMP:
      return m->geom_solimp + mjNIMP * i + k;
    case ckPARAM_DOF_DAMPING:
      return m->dof_damping + i;
    case ckPARAM_DOF_ARMATURE:
      return m->dof_armature + i;
    case ckPARAM_JNT_STIFFNESS:
      return m->jnt_stiffness + i;
    case ckPARAM_DOF_FRICTIONLOSS:
      return m->dof_frictionloss + i;
    case ckPARAM_ACTUATOR_GAINPRM:
      return m->actuator_gainprm + mjNGAIN * i + k;
    case ckPARAM_ACTUATOR_BIASPRM:
      return m->actuator_biasprm + mjNBIAS * i + k;
    default:
      return m->opt.gravity + k;
  }
}

// a parameter of the copy mp of base
ParamSlot Slot(mjModel* mp, const mjModel* base, const ckParam& p, ConstCache* cache) {
  ParamSlot slot;
  slot.cache = cache;
  slot.field = ParamField(mp, p);
  slot.base = base;
  slot.base_field = ParamField(const_cast<mjModel*>(base), p);
  slot.derived = ParamKindDerived(p.kind);
  slot.impedance = p.kind == ckPARAM_GEOM_SOLREF || p.kind == ckPARAM_GEOM_SOLIMP;
  return slot;
}

//---------------------------------- the derivative's part -----------------------------------------

bool Derivative::SetupParams(const mjModel* m, std::string* error) {
  param_model_ = mj_copyModel(nullptr, m);
  if (!param_model_) {
    *error = "could not allocate the parameter Jacobian's model copy";
    return false;
  }
  const_cache_.Setup(m);
  param_next_.assign(2 * static_cast<size_t>(nq_ + nv_ + na_), 0.0);
  param_sensor_.assign(2 * static_cast<size_t>(ns_), 0.0);
  param_dq_.assign(static_cast<size_t>(nv_), 0.0);
  return true;
}

bool Derivative::ParamTangent(const mjModel* m, int k) {
  const ckParam& p = param_.params[k];
  const int damping_dof = p.kind == ckPARAM_DOF_DAMPING ? p.id : -1;
  // the solvers' problems fold the damping the integrator treats implicitly into M_eff (Extract);
  // "mujoco"'s holds M
  const bool fold = stage_.solver && (integrator_.damped || integrator_.implicit);
  return smooth_.ParamTangent(m, param_model_, Slot(param_model_, m, p, &const_cache_), damping_dof,
                              fold);
}

void Derivative::EmitParam(int k, const double* out) {
  const int ndx = 2 * nv_ + na_, np = param_.np;
  if (param_.dx) {
    for (int i = 0; i < ndx; i++) param_.dx[static_cast<size_t>(i) * np + k] = out[i];
  }
  EmitParamSensor(k);
}

void Derivative::EmitParamSensor(int k) {
  if (!param_.ds) return;
  double* ds = out_.sensor_col;
  smooth_.ParamSensorTangent(param_model_,
                             Slot(param_model_, param_.base, param_.params[k], &const_cache_), ds);
  for (int i = 0; i < ns_; i++) param_.ds[static_cast<size_t>(i) * param_.np + k] = ds[i];
}

void Derivative::ParamFiniteDiff(const mjModel* m, const mjData* d, int k) {
  const int nq = nq_, nv = nv_, na = na_, ns = ns_, np = param_.np, nx = nq + nv + na;
  const ParamSlot slot = Slot(param_model_, m, param_.params[k], &const_cache_);
  const mjtNum value = *slot.field;
  const double eps = kParamFdStep * (1 + std::fabs(value));
  for (int side = 0; side < 2; side++) {
    SetParam(param_model_, slot, side == 0 ? value + eps : value - eps, stage_data_);
    CopyStepInputs(m, d, stage_data_);
    ResetShadow();
    StepSkip(shadow_, param_model_, stage_data_, mjSTAGE_NONE, param_.ds ? 0 : 1);
    double* next = param_next_.data() + side * nx;
    mju_copy(next, stage_data_->qpos, nq);
    mju_copy(next + nq, stage_data_->qvel, nv);
    mju_copy(next + nq + nv, stage_data_->act, na);
    if (param_.ds) mju_copy(param_sensor_.data() + side * ns, stage_data_->sensordata, ns);
  }
  SetParam(param_model_, slot, value, stage_data_);

  const double* plus = param_next_.data();
  const double* minus = plus + nx;
  if (param_.dx) {
    double* dq = param_dq_.data();
    mj_differentiatePos(m, dq, 2 * eps, minus, plus);
    for (int i = 0; i < nv; i++) param_.dx[static_cast<size_t>(i) * np + k] = dq[i];
    for (int i = 0; i < nv + na; i++) {
      param_.dx[static_cast<size_t>(nv + i) * np + k] = (plus[nq + i] - minus[nq + i]) / (2 * eps);
    }
  }
  if (param_.ds) {
    const double* sp = param_sensor_.data();
    for (int i = 0; i < ns; i++) {
      param_.ds[static_cast<size_t>(i) * np + k] = (sp[i] - sp[ns + i]) / (2 * eps);
    }
  }
}

int Derivative::ParamJacobian(const mjModel* m, const mjData* d, const ckParam* params, int np,
                              mjtNum* DxDp, mjtNum* DsDp, int* how) {
  const size_t ndx = 2 * nv_ + na_;
  if (DxDp) std::memset(DxDp, 0, sizeof(mjtNum) * ndx * np);
  if (DsDp) std::memset(DsDp, 0, sizeof(mjtNum) * ns_ * np);
  // the caller's current values, unless they are those of the last call (each call leaves the
  // copy at them, bit for bit); mj_setConst's results are kept while they stay
  if (!const_cache_.Check(m)) const_cache_.Sync(param_model_, m);
  param_ = ParamCall();
  param_.params = params;
  param_.base = m;
  param_.np = np;
  param_.dx = DxDp;
  param_.ds = DsDp;
  param_.how = how;
  if (!DxDp && !DsDp) {
    for (int k = 0; k < np && how; k++) how[k] = ckPARAM_ANALYTIC;
    return 0;
  }

  // the analytic directions: the model's single-stage integrators (not RK4, not the adaptive
  // pairs), the Jacobian's own analytic path, none of its optional corrections (contacts from
  // distance, elastic) whose parameter tangents are left out
  bool any = false;
  for (int k = 0; k < np; k++) any |= ParamKindAnalytic(params[k].kind);
  const bool adaptive = settings_.integrator != ckINT_MODEL;
  bool analytic = any && (adaptive || m->opt.integrator != mjINT_RK4) &&
                  !(settings_.deriv.cfd_width > 0) && !settings_.deriv.elastic_correction;
  fallback_ = ckFALLBACK_NONE;
  if (analytic) {
    sink_ = Sink();
    param_.run = true;
    analytic = Run(m, d) == 0;
    param_.run = false;
  }

  // the others by central differences of ck_step on the copy
  int ret = 0;
  for (int k = 0; k < np; k++) {
    const bool fd = !analytic || !ParamAnalytic(k);
    if (how) how[k] = fd ? ckPARAM_FINITE_DIFF : ckPARAM_ANALYTIC;
    if (!fd) continue;
    ParamFiniteDiff(m, d, k);
    ret = 1;
  }
  return ret;
}

int CheckParams(ckHandle* ck, const mjModel* m, const ckParam* params, int np, const char* fn) {
  if (!params || np <= 0) {
    SetLastError(ck, fn, params ? "np = %d; at least one parameter is needed" : "params is NULL",
                 np);
    return -1;
  }
  char buf[512];
  for (int k = 0; k < np; k++) {
    if (ck_checkParam(m, params + k, buf, sizeof(buf)) != 0) {
      SetLastError(ck, fn, "params[%d]: %s", k, buf);
      return -1;
    }
  }
  return 0;
}

}  // namespace contactkit

//---------------------------------- C API ---------------------------------------------------------

extern "C" {

const char* ck_paramKindName(int kind) {
  return kind >= 0 && kind < ckNPARAMKIND ? contactkit::kKindNames[kind] : nullptr;
}

int ck_checkParam(const mjModel* m, const ckParam* param, char* error, int error_sz) {
  using namespace contactkit;
  if (error && error_sz > 0) error[0] = 0;
  if (!m || !param) {
    Message(error, error_sz, "ck_checkParam: %s is NULL", m ? "param" : "m");
    return -1;
  }
  const int kind = param->kind;
  if (kind < 0 || kind >= ckNPARAMKIND) {
    Message(error, error_sz, "parameter kind %d out of range 0..%d; %s", kind, ckNPARAMKIND - 1,
            kSyntax);
    return -1;
  }
  const int first = kKinds[kind].objtype == mjOBJ_BODY ? 1 : 0;
  const int count = ObjectCount(m, kind), ncomp = ComponentCount(kind);
  if (kind != ckPARAM_GRAVITY && (param->id < first || param->id >= count)) {
    if (count <= first) {
      Message(error, error_sz, "%s: id %d, but the model has no %s", kKindNames[kind], param->id,
              kKinds[kind].object);
    } else {
      Message(error, error_sz, "%s: id %d out of range %d..%d", kKindNames[kind], param->id, first,
              count - 1);
    }
    return -1;
  }
  if (param->index < 0 || param->index >= ncomp) {
    Message(error, error_sz, "%s: index %d out of range 0..%d", kKindNames[kind], param->index,
            ncomp - 1);
    return -1;
  }
  return 0;
}

int ck_parseParam(const mjModel* m, const char* text, ckParam* param, char* error, int error_sz) {
  using namespace contactkit;
  if (error && error_sz > 0) error[0] = 0;
  if (!m || !text || !param) {
    Message(error, error_sz, "ck_parseParam: %s is NULL", !m ? "m" : !text ? "text" : "param");
    return -1;
  }
  // tokens separated by ':'
  std::string tok[5];
  int ntok = 0;
  for (const char* c = text;; c++) {
    if (*c == ':' || *c == 0) {
      ntok++;
      if (*c == 0 || ntok == 5) break;
    } else {
      tok[ntok] += *c;
    }
  }
  ckParam p{-1, 0, 0};
  int itok = 3;            // the index token
  bool joint_dof = false;  // a dof kind named by its joint
  if (tok[0] == "gravity" && ntok <= 2) {
    p.kind = ckPARAM_GRAVITY;
    itok = 1;
  } else if (ntok >= 3 && ntok <= 4) {
    for (int k = 0; k < ckNPARAMKIND; k++) {
      if (tok[2] == kKinds[k].field && tok[0] == kKinds[k].object) p.kind = k;
    }
    if (p.kind < 0 && tok[0] == "joint") {
      for (int k : {ckPARAM_DOF_DAMPING, ckPARAM_DOF_ARMATURE, ckPARAM_DOF_FRICTIONLOSS}) {
        if (tok[2] == kKinds[k].field) p.kind = k;
      }
      joint_dof = p.kind >= 0;
    }
  }
  if (p.kind < 0) {
    Message(error, error_sz, "unknown parameter '%s'; %s", text, kSyntax);
    return -1;
  }
  if (ntok > itok) {
    p.index = ParseIndex(tok[itok]);
    if (p.index < 0) {
      Message(error, error_sz, "'%s': the index '%s' is not a non-negative integer", text,
              tok[itok].c_str());
      return -1;
    }
  }
  if (p.kind != ckPARAM_GRAVITY) {
    // the object: an id, or a name (dof kinds: a joint's name and its dof I)
    const int id = ParseIndex(tok[1]);
    const int objtype = kKinds[p.kind].objtype;
    if (joint_dof || (objtype == mjOBJ_DOF && id < 0)) {
      const int j = joint_dof && id >= 0 ? id : mj_name2id(m, mjOBJ_JOINT, tok[1].c_str());
      if (j < 0 || j >= m->njnt) {
        Message(error, error_sz, "'%s': no joint '%s' (%d joints)", text, tok[1].c_str(),
                static_cast<int>(m->njnt));
        return -1;
      }
      const int ndof = m->jnt_type[j] == mjJNT_FREE ? 6 : m->jnt_type[j] == mjJNT_BALL ? 3 : 1;
      if (p.index >= ndof) {
        Message(error, error_sz, "'%s': joint '%s' has dofs 0..%d", text, tok[1].c_str(), ndof - 1);
        return -1;
      }
      p.id = m->jnt_dofadr[j] + p.index;
      p.index = 0;
    } else if (id >= 0) {
      p.id = id;
    } else {
      p.id = mj_name2id(m, objtype, tok[1].c_str());
      if (p.id < 0) {
        Message(error, error_sz, "'%s': no %s named '%s' (ids 0..%d)", text, kKinds[p.kind].object,
                tok[1].c_str(), ObjectCount(m, p.kind) - 1);
        return -1;
      }
    }
  }
  if (ck_checkParam(m, &p, error, error_sz) != 0) return -1;
  *param = p;
  return 0;
}

int ck_paramJac(ckHandle* ck, const mjModel* m, const mjData* d, const ckParam* params, int np,
                mjtNum* DxDp, mjtNum* DsDp, int* how) {
  using namespace contactkit;
  const char* fn = "ck_paramJac";
  InUse guard(ck, fn);
  if (!guard.ok()) return -1;
  ck->fallback = ckFALLBACK_NONE;
  const int check = CheckTransition(ck, m, d, fn);
  if (check) return check;
  if (CheckParams(ck, m, params, np, fn)) return -1;
  const int resets = ck->deriv->ScratchResets();
  const int ret = ck->deriv->ParamJacobian(m, d, params, np, DxDp, DsDp, how);
  if (ck->deriv->ScratchResets() != resets || ck->deriv->refused()) {
    SetLastError(ck, fn,
                 "MuJoCo reset the state within the step (NaN, inf or beyond 1e10), or the "
                 "implicit integrator cannot factor M - h qDeriv there; no Jacobian");
    return -2;
  }
  const size_t ndx = 2 * m->nv + m->na, ns = m->nsensordata;
  for (const auto& o : {std::make_pair(static_cast<const mjtNum*>(DxDp), ndx),
                        std::make_pair(static_cast<const mjtNum*>(DsDp), ns)}) {
    for (size_t i = 0; o.first && i < o.second * np; i++) {
      if (!std::isfinite(o.first[i])) {
        SetLastError(ck, fn, "the result is not finite (entry %zu)", i);
        return -2;
      }
    }
  }
  if (ret == 1) {
    const int reason = ck->deriv->fallback();
    SetLastError(ck, fn, "finite differences for some parameters (how[k] = 1)%s%s",
                 reason ? ": " : "", reason ? ck_fallbackText(reason) : "");
  }
  return ret;
}

}  // extern "C"
