// Copyright 2026 The contactkit developers.
//
// iLQR (Li and Todorov's iterative LQR with Tassa's regularization) on MuJoCo's tangent-space
// state, with an augmented Lagrangian on the goal entries at the horizon: inner iLQR loops on
//   sum_t 0.5 |x_t - goal|_Q^2 + 0.5 |u_t|_R^2 + lambda' c(x_T) + 0.5 rho |c(x_T)|^2,
// then lambda += rho c, rho *= 10 until |c|_inf is below the tolerance.
#include "tools/common/ilqr.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "solvers/common/dense.h"

namespace contactkit::tools {
namespace {

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// the tangent-space error (2nv+na) of a state from the task's goal, or from its waypoint (whose
// velocity is free) at the waypoint's step
void StateError(const mjModel* m, const IlqrTask& task, bool waypoint, const double* qpos,
                const double* qvel, const double* act, double* e) {
  const int nv = m->nv;
  mj_differentiatePos(m, e, 1, waypoint ? task.waypoint_qpos.data() : task.goal_qpos.data(), qpos);
  for (int i = 0; i < nv; i++) e[nv + i] = qvel[i] - (waypoint ? 0 : task.goal_qvel[i]);
  for (int i = 0; i < m->na; i++) e[2 * nv + i] = act[i];
}

// the task's nominal control j (zero without one)
double Nominal(const IlqrTask& task, int j) {
  return task.nominal_ctrl.empty() ? 0 : task.nominal_ctrl[j];
}

// the augmented Lagrangian's update from the error e at the horizon: lambda += rho c, rho *= 10
void UpdateMultipliers(const IlqrTask& task, const double* e, std::vector<double>* lambda,
                       double* rho) {
  for (size_t k = 0; k < lambda->size(); k++) (*lambda)[k] += *rho * e[task.constrained[k]];
  *rho *= 10;
}

class Ilqr {
 public:
  Ilqr(const mjModel* m, const mjData* start, ckHandle* ck, IlqrSource source, const IlqrTask& task,
       const IlqrOptions& options)
      : m_(m),
        start_(start),
        ck_(ck),
        source_(source),
        task_(task),
        opt_(options),
        nq_(m->nq),
        nv_(m->nv),
        na_(m->na),
        nu_(m->nu),
        ndx_(2 * m->nv + m->na),
        T_(task.horizon) {
    d_ = mj_makeData(m);
    mj_copyData(d_, m, start);
    const int nx = nq_ + nv_ + na_;
    X_.resize((T_ + 1) * nx);
    Xn_ = X_;
    U_.assign(T_ * nu_, 0.0);
    for (int t = 0; t < T_; t++) {
      for (int j = 0; j < nu_; j++) U_[t * nu_ + j] = Nominal(task, j);
    }
    Un_ = U_;
    W_.resize(T_ * nv_);
    fresh_.assign(T_, 0);
    A_.resize(T_ * ndx_ * ndx_);
    B_.resize(T_ * ndx_ * nu_);
    k_.resize(T_ * nu_);
    K_.resize(T_ * nu_ * ndx_);
    lambda_.assign(task.constrained.size(), 0.0);
    rho_ = options.rho;
  }
  ~Ilqr() { mj_deleteData(d_); }

  IlqrResult Run();

 private:
  double* X(std::vector<double>& x, int t) { return x.data() + t * (nq_ + nv_ + na_); }
  // StateError of a packed state x (qpos, qvel, act) from the goal, or from the waypoint
  void Diff(const double* x, bool waypoint, double* dx) const;
  // rollout of controls u (feedback on xref with gains when alpha > 0) into x, u; cost or inf
  double Rollout(double alpha, std::vector<double>* x, std::vector<double>* u);
  // cost of a trajectory: stage and terminal (plain), and with the constraint terms (out)
  double Cost(std::vector<double>& x, const std::vector<double>& u, double* plain);
  void Derivatives();
  // kIlqrContactkitAware: A_t, B_t from x_t with the next state's cost-to-go gradient Vx
  void AwareJacobian(int t, const std::vector<double>& Vx);
  bool Backward(double mu);
  double Violation();

  const mjModel* m_;
  const mjData* start_;
  ckHandle* ck_;
  IlqrSource source_;
  const IlqrTask& task_;
  IlqrOptions opt_;
  int nq_, nv_, na_, nu_, ndx_, T_;
  mjData* d_;
  std::vector<double> X_, Xn_, U_, Un_;  // trajectory and trial (T+1 x nq+nv+na, T x nu)
  std::vector<double> A_, B_;            // Jacobians (T x ndx x ndx, T x ndx x nu)
  std::vector<double> W_;                // warm start of each step's state (T x nv)
  std::vector<char> fresh_;              // aware: A_t, B_t made for this trajectory (T)
  std::vector<double> k_, K_;            // feedforward and gains (T x nu, T x nu x ndx)
  std::vector<double> lambda_;           // multipliers of the goal entries
  double rho_ = 10;
  double deriv_seconds_ = 0;
  bool diverged_ = false;
};

void Ilqr::Diff(const double* x, bool waypoint, double* dx) const {
  StateError(m_, task_, waypoint, x, x + nq_, x + nq_ + nv_, dx);
}

double Ilqr::Rollout(double alpha, std::vector<double>* x, std::vector<double>* u) {
  mj_copyData(d_, m_, start_);
  if (ck_) ck_reset(ck_);
  std::vector<double> dx(ndx_);
  for (int t = 0; t <= T_; t++) {
    double* xt = X(*x, t);
    std::copy_n(d_->qpos, nq_, xt);
    std::copy_n(d_->qvel, nv_, xt + nq_);
    std::copy_n(d_->act, na_, xt + nq_ + nv_);
    if (t == T_) break;
    double* ut = u->data() + t * nu_;
    if (alpha > 0) {
      double* xr = X(X_, t);
      mj_differentiatePos(m_, dx.data(), 1, xr, xt);
      for (int i = 0; i < nv_ + na_; i++) dx[nv_ + i] = xt[nq_ + i] - xr[nq_ + i];
      for (int j = 0; j < nu_; j++) {
        double v = U_[t * nu_ + j] + alpha * k_[t * nu_ + j];
        for (int i = 0; i < ndx_; i++) v += K_[(t * nu_ + j) * ndx_ + i] * dx[i];
        ut[j] = v;
      }
    }
    for (int j = 0; j < nu_; j++) {
      if (m_->actuator_ctrllimited[j]) {
        ut[j] = std::clamp(ut[j], m_->actuator_ctrlrange[2 * j], m_->actuator_ctrlrange[2 * j + 1]);
      }
      d_->ctrl[j] = ut[j];
    }
    if (ck_) {
      ck_step(ck_, m_, d_);
    } else {
      mj_step(m_, d_);
    }
    bool bad = d_->warning[mjWARN_BADQACC].number > 0 || d_->warning[mjWARN_BADQVEL].number > 0;
    for (int i = 0; i < nv_ && !bad; i++) bad = !(std::fabs(d_->qvel[i]) < 1e3);
    if (bad) return HUGE_VAL;
  }
  double plain;
  return Cost(*x, *u, &plain);
}

double Ilqr::Cost(std::vector<double>& x, const std::vector<double>& u, double* plain) {
  std::vector<double> dx(ndx_);
  double c = 0;
  for (int t = 0; t <= T_; t++) {
    const bool way = t == task_.waypoint_step;
    Diff(X(x, t), way, dx.data());
    const std::vector<double>& q = way ? task_.waypoint_q : task_.q;
    for (int i = 0; i < ndx_; i++) c += 0.5 * q[i] * dx[i] * dx[i];
    if (t < T_) {
      for (int j = 0; j < nu_; j++) {
        const double du = u[t * nu_ + j] - Nominal(task_, j);
        c += 0.5 * task_.r[j] * du * du;
      }
    }
  }
  *plain = c;
  for (size_t k = 0; k < task_.constrained.size(); k++) {
    const double ck = dx[task_.constrained[k]];
    c += lambda_[k] * ck + 0.5 * rho_ * ck * ck;
  }
  return c;
}

void Ilqr::Derivatives() {
  mj_copyData(d_, m_, start_);
  if (ck_) ck_reset(ck_);
  for (int t = 0; t < T_; t++) {
    // the step from x_t: the warm start of the rollout that reached it
    const double* xt = X(X_, t);
    std::copy_n(xt, nq_, d_->qpos);
    std::copy_n(xt + nq_, nv_, d_->qvel);
    std::copy_n(xt + nq_ + nv_, na_, d_->act);
    std::copy_n(U_.data() + t * nu_, nu_, d_->ctrl);
    double* A = A_.data() + t * ndx_ * ndx_;
    double* B = B_.data() + t * ndx_ * nu_;
    std::copy_n(d_->qacc_warmstart, nv_, W_.data() + t * nv_);
    fresh_[t] = 0;
    const double t0 = Now();
    if (source_ == kIlqrContactkitAware) {
      // made in the backward pass, once its direction is known
    } else if (source_ == kIlqrContactkit) {
      if (ck_transitionJac(ck_, m_, d_, A, B, nullptr, nullptr) < 0) diverged_ = true;
    } else {
      mjd_transitionFD(m_, d_, 1e-6, 0, A, B, nullptr, nullptr);
    }
    deriv_seconds_ += Now() - t0;
    // the next state's warm start (and comfree's anchors) as in the rollout
    if (ck_) {
      ck_step(ck_, m_, d_);
    } else {
      mj_step(m_, d_);
    }
  }
}

void Ilqr::AwareJacobian(int t, const std::vector<double>& Vx) {
  if (fresh_[t]) return;  // a retry of the backward pass keeps the first direction's Jacobians
  const double* xt = X(X_, t);
  std::copy_n(xt, nq_, d_->qpos);
  std::copy_n(xt + nq_, nv_, d_->qvel);
  std::copy_n(xt + nq_ + nv_, na_, d_->act);
  std::copy_n(U_.data() + t * nu_, nu_, d_->ctrl);
  std::copy_n(W_.data() + t * nv_, nv_, d_->qacc_warmstart);
  const double t0 = Now();
  if (ck_transitionJacAware(ck_, m_, d_, Vx.data(), A_.data() + t * ndx_ * ndx_,
                            B_.data() + t * ndx_ * nu_, nullptr, nullptr) < 0) {
    diverged_ = true;
  }
  deriv_seconds_ += Now() - t0;
  fresh_[t] = 1;
}

bool Ilqr::Backward(double mu) {
  const int n = ndx_, nu = nu_;
  // value function at the horizon: the goal weights and the constraint terms
  std::vector<double> dx(n), Vx(n), Vxx(n * n, 0.0);
  Diff(X(X_, T_), false, dx.data());
  for (int i = 0; i < n; i++) {
    Vx[i] = task_.q[i] * dx[i];
    Vxx[i * n + i] = task_.q[i];
  }
  for (size_t k = 0; k < task_.constrained.size(); k++) {
    const int i = task_.constrained[k];
    Vx[i] += lambda_[k] + rho_ * dx[i];
    Vxx[i * n + i] += rho_;
  }
  std::vector<double> Qx(n), Qu(nu), Qxx(n * n), Quu(nu * nu), Qux(nu * n), VA(n * n), VB(n * nu);
  for (int t = T_ - 1; t >= 0; t--) {
    if (source_ == kIlqrContactkitAware) AwareJacobian(t, Vx);
    const double* A = A_.data() + t * n * n;
    const double* B = B_.data() + t * n * nu;
    const bool way = t == task_.waypoint_step;
    const std::vector<double>& q = way ? task_.waypoint_q : task_.q;
    Diff(X(X_, t), way, dx.data());
    // VA = Vxx A, VB = Vxx B
    for (int i = 0; i < n; i++) {
      for (int j = 0; j < n; j++) {
        double s = 0;
        for (int l = 0; l < n; l++) s += Vxx[i * n + l] * A[l * n + j];
        VA[i * n + j] = s;
      }
      for (int j = 0; j < nu; j++) {
        double s = 0;
        for (int l = 0; l < n; l++) s += Vxx[i * n + l] * B[l * nu + j];
        VB[i * nu + j] = s;
      }
    }
    for (int i = 0; i < n; i++) {
      double s = q[i] * dx[i];
      for (int l = 0; l < n; l++) s += A[l * n + i] * Vx[l];
      Qx[i] = s;
      for (int j = 0; j < n; j++) {
        double h = i == j ? q[i] : 0;
        for (int l = 0; l < n; l++) h += A[l * n + i] * VA[l * n + j];
        Qxx[i * n + j] = h;
      }
    }
    for (int a = 0; a < nu; a++) {
      double s = task_.r[a] * (U_[t * nu + a] - Nominal(task_, a));
      for (int l = 0; l < n; l++) s += B[l * nu + a] * Vx[l];
      Qu[a] = s;
      for (int b = 0; b < nu; b++) {
        double h = a == b ? task_.r[a] + mu : 0;
        for (int l = 0; l < n; l++) h += B[l * nu + a] * VB[l * nu + b];
        Quu[a * nu + b] = h;
      }
      for (int j = 0; j < n; j++) {
        double h = 0;
        for (int l = 0; l < n; l++) h += B[l * nu + a] * VA[l * n + j];
        Qux[a * n + j] = h;
      }
    }
    // k = -Quu^-1 Qu, K = -Quu^-1 Qux
    std::vector<double> L = Quu;
    if (!CholFactor(L.data(), nu)) return false;
    double* k = k_.data() + t * nu;
    double* K = K_.data() + t * nu * n;
    for (int a = 0; a < nu; a++) k[a] = -Qu[a];
    CholSolve(L.data(), nu, k);
    std::vector<double> col(nu);
    for (int j = 0; j < n; j++) {
      for (int a = 0; a < nu; a++) col[a] = -Qux[a * n + j];
      CholSolve(L.data(), nu, col.data());
      for (int a = 0; a < nu; a++) K[a * n + j] = col[a];
    }
    // Vx = Qx + K' Quu k + K' Qu + Qux' k; Vxx = Qxx + K' Quu K + K' Qux + Qux' K
    for (int i = 0; i < n; i++) {
      double s = Qx[i];
      for (int a = 0; a < nu; a++) {
        double quk = 0;
        for (int b = 0; b < nu; b++) quk += Quu[a * nu + b] * k[b];
        s += K[a * n + i] * (quk + Qu[a]) + Qux[a * n + i] * k[a];
      }
      Vx[i] = s;
    }
    for (int i = 0; i < n; i++) {
      for (int j = 0; j <= i; j++) {
        double s = Qxx[i * n + j];
        for (int a = 0; a < nu; a++) {
          double quK = 0;
          for (int b = 0; b < nu; b++) quK += Quu[a * nu + b] * K[b * n + j];
          s += K[a * n + i] * (quK + Qux[a * n + j]) + Qux[a * n + i] * K[a * n + j];
        }
        Vxx[i * n + j] = Vxx[j * n + i] = s;
      }
    }
  }
  return true;
}

double Ilqr::Violation() {
  std::vector<double> dx(ndx_);
  Diff(X(X_, T_), false, dx.data());
  double v = 0;
  for (int i : task_.constrained) v = std::max(v, std::fabs(dx[i]));
  return v;
}

IlqrResult Ilqr::Run() {
  IlqrResult res;
  const double t0 = Now();
  double cost = Rollout(0, &X_, &U_), plain = 0;
  if (!std::isfinite(cost)) {
    res.diverged = true;
    res.error = "the first rollout diverged";
  }
  double mu = 1e-6;
  for (int outer = 0; outer < opt_.max_outer && !res.diverged; outer++) {
    cost = Cost(X_, U_, &plain);
    for (; res.iterations < opt_.max_iterations; res.iterations++) {
      Derivatives();
      if (diverged_) {
        res.diverged = true;
        res.error = "a Jacobian failed";
        break;
      }
      while (!Backward(mu) && mu < 1e10) mu = std::max(1e-4, 10 * mu);
      if (diverged_) {
        res.diverged = true;
        res.error = "a Jacobian failed";
        break;
      }
      // line search on the step length
      double best = HUGE_VAL, alpha = 1;
      for (int ls = 0; ls < 10; ls++, alpha *= 0.5) {
        best = Rollout(alpha, &Xn_, &Un_);
        if (best < cost) break;
      }
      if (!(best < cost)) {
        Cost(X_, U_, &plain);
        res.history.push_back(plain);
        res.violations.push_back(Violation());
        mu = std::max(1e-4, 10 * mu);  // no decrease: more regularization
        if (mu > 1e8) break;
        continue;
      }
      const double decrease = (cost - best) / std::max(std::fabs(cost), 1e-12);
      std::swap(X_, Xn_);
      std::swap(U_, Un_);
      cost = best;
      Cost(X_, U_, &plain);
      res.history.push_back(plain);
      res.violations.push_back(Violation());
      mu = std::max(1e-8, 0.1 * mu);
      if (decrease < opt_.tolerance) {
        res.iterations++;
        break;
      }
    }
    const double v = Violation();
    if (v < opt_.violation_tol || res.iterations >= opt_.max_iterations) break;
    std::vector<double> dx(ndx_);
    Diff(X(X_, T_), false, dx.data());
    UpdateMultipliers(task_, dx.data(), &lambda_, &rho_);
    mu = 1e-6;
  }
  Cost(X_, U_, &plain);
  res.cost = plain;
  res.violation = Violation();
  res.ctrl = U_;
  res.seconds = Now() - t0;
  res.deriv_seconds = deriv_seconds_;
  return res;
}

// Adam on the controls: the loss of ck_rolloutGrad is the stage cost of each state reached and, at
// the horizon, the constraint terms; the control cost's gradient is added here
class Adam {
 public:
  Adam(const mjModel* m, const IlqrTask& task) : m_(m), task_(task) {}

  IlqrResult Run(const mjData* start, ckHandle* ck, const IlqrOptions& options, double lr);

 private:
  // ckStepLoss: the stage weights at the state after step t, the goal's terms after the last
  static mjtNum Loss(void* user, int t, const mjModel* m, const mjData* d, mjtNum* dx, mjtNum*);
  double Terms(const mjData* d, int t, double* dx, double* violation);

  const mjModel* m_;
  const IlqrTask& task_;
  std::vector<double> lambda_;
  double rho_ = 10;
  double violation_ = 0;   // of the last rollout
  double constraint_ = 0;  // its constraint terms
};

double Adam::Terms(const mjData* d, int t, double* dx, double* violation) {
  const int nv = m_->nv, ndx = 2 * nv + m_->na;
  const bool way = t == task_.waypoint_step, last = t == task_.horizon - 1;
  std::vector<double> e(ndx);
  StateError(m_, task_, way, d->qpos, d->qvel, d->act, e.data());
  const std::vector<double>& q = way ? task_.waypoint_q : task_.q;
  double value = 0;
  for (int i = 0; i < ndx; i++) {
    value += 0.5 * q[i] * e[i] * e[i];
    dx[i] = q[i] * e[i];
  }
  if (last) {
    *violation = 0;
    for (size_t k = 0; k < task_.constrained.size(); k++) {
      const int i = task_.constrained[k];
      const double c = lambda_[k] * e[i] + 0.5 * rho_ * e[i] * e[i];
      value += c;
      constraint_ += c;
      dx[i] += lambda_[k] + rho_ * e[i];
      *violation = std::max(*violation, std::fabs(e[i]));
    }
  }
  return value;
}

mjtNum Adam::Loss(void* user, int t, const mjModel*, const mjData* d, mjtNum* dx, mjtNum*) {
  Adam* a = static_cast<Adam*>(user);
  return a->Terms(d, t, dx, &a->violation_);
}

IlqrResult Adam::Run(const mjData* start, ckHandle* ck, const IlqrOptions& options, double lr) {
  IlqrResult res;
  const double t0 = Now();
  const int nu = m_->nu, T = task_.horizon, ndx = 2 * m_->nv + m_->na;
  lambda_.assign(task_.constrained.size(), 0.0);
  rho_ = options.rho;
  std::vector<double> u(T * nu), g(T * nu), mom(T * nu, 0.0), sec(T * nu, 0.0), gx(ndx);
  for (int k = 0; k < T * nu; k++) u[k] = Nominal(task_, k % nu);
  mjData* d = mj_makeData(m_);
  const int per_outer = std::max(1, options.max_iterations / std::max(1, options.max_outer));
  for (int it = 0; it < options.max_iterations; it++) {
    mj_copyData(d, m_, start);
    ck_reset(ck);
    double value = 0;
    constraint_ = 0;
    const double tj = Now();
    const int rc =
        ck_rolloutGrad(ck, m_, d, T, u.data(), &Adam::Loss, this, &value, gx.data(), g.data());
    res.deriv_seconds += Now() - tj;
    if (rc < 0) {
      res.diverged = true;
      res.error = ck_lastError(ck);
      break;
    }
    double plain = value - constraint_;  // stage and control cost
    for (int k = 0; k < T * nu; k++) {
      const double r = task_.r[k % nu], du = u[k] - Nominal(task_, k % nu);
      g[k] += r * du;
      plain += 0.5 * r * du * du;
    }
    res.iterations = it + 1;
    res.history.push_back(plain);
    res.violations.push_back(violation_);
    res.violation = violation_;
    if (violation_ < options.violation_tol) break;
    // Adam (beta 0.9, 0.999), each control's step lr / (1 + it / 100) times its range, kept inside
    // the range
    for (int k = 0; k < T * nu; k++) {
      const int j = k % nu;
      const double range = m_->actuator_ctrllimited[j]
                               ? m_->actuator_ctrlrange[2 * j + 1] - m_->actuator_ctrlrange[2 * j]
                               : 1;
      mom[k] = 0.9 * mom[k] + 0.1 * g[k];
      sec[k] = 0.999 * sec[k] + 0.001 * g[k] * g[k];
      const double mh = mom[k] / (1 - std::pow(0.9, it + 1));
      const double vh = sec[k] / (1 - std::pow(0.999, it + 1));
      u[k] -= lr / (1 + it / 100.0) * range * mh / (std::sqrt(vh) + 1e-12);
      if (m_->actuator_ctrllimited[j]) {
        u[k] = std::clamp(u[k], m_->actuator_ctrlrange[2 * j], m_->actuator_ctrlrange[2 * j + 1]);
      }
    }
    // the multipliers after each block of iterations
    if ((it + 1) % per_outer == 0) {
      std::vector<double> e(ndx);
      StateError(m_, task_, false, d->qpos, d->qvel, d->act, e.data());
      UpdateMultipliers(task_, e.data(), &lambda_, &rho_);
    }
  }
  mj_deleteData(d);
  res.cost = res.history.empty() ? 0 : res.history.back();
  res.ctrl = u;
  res.seconds = Now() - t0;
  return res;
}

}  // namespace

IlqrResult RunAdam(const mjModel* m, const mjData* start, ckHandle* ck, const IlqrTask& task,
                   const IlqrOptions& options, double lr) {
  if (!ck) {
    IlqrResult r;
    r.error = "Adam takes ck_rolloutGrad's gradients: it needs a handle";
    return r;
  }
  Adam adam(m, task);
  return adam.Run(start, ck, options, lr);
}

IlqrResult RunIlqr(const mjModel* m, const mjData* start, ckHandle* ck, IlqrSource source,
                   const IlqrTask& task, const IlqrOptions& options) {
  if (!ck && source != kIlqrMujocoFD) {
    IlqrResult r;
    r.error = "contactkit Jacobians need a handle";
    return r;
  }
  Ilqr ilqr(m, start, ck, source, task, options);
  return ilqr.Run();
}

}  // namespace contactkit::tools
