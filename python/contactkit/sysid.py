"""System identification on trajectory residuals with contactkit's parameter Jacobians.

identify() fits model parameters (the names of Handle.param_jac: "body:box:mass",
"geom:floor:friction:0", "joint:hinge:damping", "actuator:motor:gainprm:0", "gravity:2", ...; a
list of names is one unknown shared by all of them, e.g. a cube's three half-sizes) to recorded
trajectories: each trajectory starts from its recorded initial state, replays its controls, and its
residual is the difference between the simulated and the recorded observations after every step,
scaled by the caller's weights: the state (positions in the tangent space, then velocities) or the
sensors (sensordata as mj_step leaves it: computed at the state before the step). With horizon=K
each trajectory is cut into windows of K steps, each restarted from the recorded state (multiple
shooting without defects: tumbling or sliding bodies make long rollouts chaotic in the
parameters). Box-bounded Levenberg-Marquardt (mujoco.minimize.least_squares) minimizes the sum of
squares, with the regularizer raised tenfold per rejected step (LM_OPTIONS): at the optimum every
trial step is rejected until mu_max, and mujoco.minimize's default factor 10^0.1 takes about 140
residual evaluations to get there (181 of the Panda benchmark's 55 with it; same answer).

Its Jacobian comes from forward sensitivities along each rollout, S_{t+1} = A_t S_t + P_t, with
A_t = Handle.transition_jac and P_t = Handle.param_jac at the state before step t (one rollout
per evaluation, whatever the number of parameters; sensor rows C_t S_t + DsDp_t), or, with
jacobian="fd", from mujoco.minimize's finite differences (one rollout per parameter), the scheme
of mujoco.sysid. Residuals without a Jacobian run the trajectories of one length as one batched
contactkit.rollout (one thread), the same numbers as the step-by-step rollout.

Parameters are written as a recompiled model would hold them: after the values, mj_setConst
refreshes what the compiler derives from them (subtree masses, dof_M0, invweight0), and
ck_paramJac differentiates the model so recompiled (the rows' soft-constraint scaling included).
"""

from __future__ import annotations

import dataclasses
import time
from typing import Optional, Sequence

import mujoco
import mujoco.minimize
import numpy as np

from . import _rollout
from ._handle import Handle, ParamKind, parse_params

_FULLPHYSICS = mujoco.mjtState.mjSTATE_FULLPHYSICS

# identify()'s defaults for mujoco.minimize.least_squares
LM_OPTIONS = {"mu_factor": 10.0}

# the model array of each parameter kind and whether it has components
_FIELDS = {
    ParamKind.BODY_MASS: ("body_mass", False),
    ParamKind.BODY_IPOS: ("body_ipos", True),
    ParamKind.BODY_INERTIA: ("body_inertia", True),
    ParamKind.GEOM_FRICTION: ("geom_friction", True),
    ParamKind.GEOM_SIZE: ("geom_size", True),
    ParamKind.GEOM_POS: ("geom_pos", True),
    ParamKind.GEOM_SOLREF: ("geom_solref", True),
    ParamKind.GEOM_SOLIMP: ("geom_solimp", True),
    ParamKind.DOF_DAMPING: ("dof_damping", False),
    ParamKind.DOF_ARMATURE: ("dof_armature", False),
    ParamKind.JNT_STIFFNESS: ("jnt_stiffness", False),
    ParamKind.DOF_FRICTIONLOSS: ("dof_frictionloss", False),
    ParamKind.ACTUATOR_GAINPRM: ("actuator_gainprm", True),
    ParamKind.ACTUATOR_BIASPRM: ("actuator_biasprm", True),
}


@dataclasses.dataclass
class Trajectory:
    """A recording: the initial state, the controls of each step (T, nu), the state after each
    step: qpos (T, nq), qvel (T, nv), and optionally the sensors of each step (T, nsensordata),
    as mj_step leaves sensordata (computed at the state before the step)."""

    qpos0: np.ndarray
    qvel0: np.ndarray
    ctrl: np.ndarray
    qpos: np.ndarray
    qvel: np.ndarray
    sensordata: Optional[np.ndarray] = None


def windows(traj: Trajectory, horizon: int) -> list:
    """traj cut into trajectories of at most horizon steps, each starting from the recorded state
    before its first step"""
    out = []
    for t0 in range(0, len(traj.ctrl), horizon):
        q0 = traj.qpos0 if t0 == 0 else traj.qpos[t0 - 1]
        v0 = traj.qvel0 if t0 == 0 else traj.qvel[t0 - 1]
        t1 = t0 + horizon
        sens = None if traj.sensordata is None else traj.sensordata[t0:t1]
        out.append(Trajectory(q0, v0, traj.ctrl[t0:t1], traj.qpos[t0:t1], traj.qvel[t0:t1], sens))
    return out


@dataclasses.dataclass
class Result:
    """identify()'s answer: the parameters, the final cost (half the sum of squared residuals),
    the optimizer's iterations, rollouts run and wall time (s)."""

    x: np.ndarray
    cost: float
    iterations: int
    rollouts: int
    seconds: float


def get_param(model: mujoco.MjModel, param) -> float:
    """the model's value of a parsed parameter (kind, id, index)"""
    kind, oid, index = param
    if kind == ParamKind.GRAVITY:
        return float(model.opt.gravity[index])
    name, vector = _FIELDS[ParamKind(kind)]
    array = getattr(model, name)
    return float(array[oid, index] if vector else array[oid])


_DERIVED = (ParamKind.BODY_MASS, ParamKind.BODY_IPOS, ParamKind.BODY_INERTIA,
            ParamKind.DOF_ARMATURE)


def set_params(model: mujoco.MjModel, params, values, data: Optional[mujoco.MjData] = None):
    """write parsed parameters (lists of (kind, id, index), each list one value) into the model,
    then, if any is inertial, refresh the compiler's derived constants (mj_setConst)"""
    derived = False
    for group, v in zip(params, values):
        for p in group:
            set_param(model, p, v)
            derived |= ParamKind(p[0]) in _DERIVED
    if derived:
        mujoco.mj_setConst(model, data if data is not None else mujoco.MjData(model))


def set_param(model: mujoco.MjModel, param, value: float) -> None:
    """write a parsed parameter (kind, id, index) into the model's field (set_params also
    refreshes the derived constants)"""
    kind, oid, index = param
    if kind == ParamKind.GRAVITY:
        model.opt.gravity[index] = value
        return
    name, vector = _FIELDS[ParamKind(kind)]
    array = getattr(model, name)
    if vector:
        array[oid, index] = value
    else:
        array[oid] = value


class _Problem:
    """the residual and its Jacobian over every trajectory, counting rollouts"""

    def __init__(self, model, handle, groups, trajectories, weights, sensors, settings=None):
        self.model, self.handle, self.groups = model, handle, groups
        self.settings = dict(settings or {})  # the handle's, for the batched residual rollouts
        self.flat = [p for g in groups for p in g]
        # columns of the flat parameters summed into each unknown
        self.tie = np.zeros((len(self.flat), len(groups)))
        k = 0
        for j, g in enumerate(groups):
            self.tie[k:k + len(g), j] = 1
            k += len(g)
        self.trajectories = trajectories
        self.weights = weights
        self.sensors = sensors
        self.data = mujoco.MjData(model)
        self.rollouts = 0
        # the Jacobians a sensitivity step reads (B and D are not computed)
        nx = 2 * model.nv + model.na
        self.A = np.zeros((nx, nx))
        self.C = np.zeros((model.nsensordata, nx)) if sensors else None

    def rollout(self, x: np.ndarray, traj: Trajectory, jac: bool):
        m, d, h = self.model, self.data, self.handle
        set_params(m, self.groups, x, d)
        mujoco.mj_resetData(m, d)
        d.qpos[:], d.qvel[:] = traj.qpos0, traj.qvel0
        h.reset()
        nv = m.nv
        S = np.zeros((2 * nv + m.na, len(self.groups)))
        res, rows = [], []
        dq = np.zeros(nv)
        for t in range(len(traj.ctrl)):
            d.ctrl[:] = traj.ctrl[t]
            if jac:
                A, _, C, _ = h.transition_jac(m, d, A=self.A, C=self.C)
                P, Ps, _ = h.param_jac(m, d, self.flat)
                if self.sensors:
                    rows.append((C @ S + Ps @ self.tie) * self.weights[:, None])
                S = A @ S + P @ self.tie
            h.step(m, d)
            if self.sensors:
                res.append((d.sensordata - traj.sensordata[t]) * self.weights)
            else:
                mujoco.mj_differentiatePos(m, dq, 1.0, traj.qpos[t], d.qpos)
                res.append(np.concatenate([dq, d.qvel - traj.qvel[t]]) * self.weights)
                if jac:
                    rows.append(S[:2 * nv] * self.weights[:, None])
        self.rollouts += 1
        return np.concatenate(res), (np.vstack(rows) if jac else None)

    def _batches(self):
        """the trajectories grouped by length: (indices, initial states (n, nstate), controls
        (n, T, nu)), built once"""
        if not hasattr(self, "_groups_by_length"):
            m, d = self.model, self.data
            nstate = mujoco.mj_stateSize(m, _FULLPHYSICS)
            by_length: dict = {}
            for i, tr in enumerate(self.trajectories):
                mujoco.mj_resetData(m, d)
                d.qpos[:], d.qvel[:] = tr.qpos0, tr.qvel0
                s0 = np.empty(nstate)
                mujoco.mj_getState(m, d, s0, _FULLPHYSICS)
                by_length.setdefault(len(tr.ctrl), []).append((i, s0))
            self._groups_by_length = [
                ([i for i, _ in group], np.array([s0 for _, s0 in group]),
                 np.array([self.trajectories[i].ctrl for i, _ in group]).reshape(
                     len(group), length, m.nu))
                for length, group in by_length.items()]
        return self._groups_by_length

    def _residual_of(self, traj: Trajectory, state: np.ndarray, sensordata: np.ndarray):
        """traj's residual from a batched rollout's states and sensors (as rollout() computes it
        step by step)"""
        if self.sensors:
            return ((sensordata - traj.sensordata) * self.weights).ravel()
        m, nv = self.model, self.model.nv
        qpos = state[:, 1:1 + m.nq]  # full-physics state: time, qpos, qvel, ...
        dq = np.empty((len(qpos), nv))
        for t in range(len(qpos)):
            mujoco.mj_differentiatePos(m, dq[t], 1.0, traj.qpos[t], qpos[t])
        dv = state[:, 1 + m.nq:1 + m.nq + nv] - traj.qvel
        return (np.hstack([dq, dv]) * self.weights).ravel()

    def residual(self, x: np.ndarray) -> np.ndarray:
        """the residual at each column of x: every trajectory of the same length in one batched
        rollout (contactkit.rollout, one thread: no Python per step), the same numbers as
        rollout(jac=False)"""
        cols = []
        for k in range(x.shape[1]):
            set_params(self.model, self.groups, x[:, k], self.data)
            parts: list = [None] * len(self.trajectories)
            for index, s0, u in self._batches():
                state, sens = _rollout.rollout(self.model, self.data, s0, u, nthread=1,
                                               **self.settings)
                for j, i in enumerate(index):
                    parts[i] = self._residual_of(self.trajectories[i], state[j], sens[j])
            self.rollouts += len(self.trajectories)
            cols.append(np.concatenate(parts))
        return np.stack(cols, axis=1)

    def jacobian(self, x: np.ndarray, r: np.ndarray) -> np.ndarray:
        return np.vstack([self.rollout(x[:, 0], tr, True)[1] for tr in self.trajectories])


def _groups(model: mujoco.MjModel, params: Sequence) -> list:
    """each entry (a name, a (kind, id, index) tuple, or a list of them) as a list of parsed
    parameters"""
    groups = []
    for entry in params:
        many = isinstance(entry, list)
        groups.append(parse_params(model, entry if many else [entry]))
        if many and not entry:
            raise ValueError("identify: an empty list of parameters names no unknown")
    return groups


def _check_trajectory(model: mujoco.MjModel, tr: Trajectory, sensors: bool) -> None:
    T = len(tr.ctrl)
    shapes = {"qpos0": (model.nq,), "qvel0": (model.nv,), "ctrl": (T, model.nu),
              "qpos": (T, model.nq), "qvel": (T, model.nv)}
    if sensors:
        shapes["sensordata"] = (T, model.nsensordata)
        if tr.sensordata is None:
            raise ValueError("observe='sensors' needs each trajectory's sensordata (T, "
                             f"{model.nsensordata})")
    for name, shape in shapes.items():
        got = np.shape(getattr(tr, name))
        if got != shape:
            raise ValueError(f"trajectory {name} must have shape {shape}, got {got}")


def identify(model: mujoco.MjModel, params: Sequence, trajectories: Sequence[Trajectory],
             x0: Optional[np.ndarray] = None, bounds: Optional[Sequence[np.ndarray]] = None,
             weights: Optional[np.ndarray] = None, jacobian: str = "analytic",
             observe: str = "state", horizon: Optional[int] = None,
             max_iter: int = 50, verbose: int = 0, executor=None,
             optimizer_options: Optional[dict] = None, **settings) -> Result:
    """Fit params (names, (kind, id, index) tuples, or lists of them sharing one value) to
    trajectories, starting from x0 (default: the model's values) within bounds (lower, upper).
    observe: "state" (weights (2 nv,) scale positions and velocities) or "sensors" (weights
    (nsensordata,)). horizon: windows of that many steps restarted from the recorded state (None:
    whole trajectories). jacobian: "analytic" (contactkit's sensitivities) or "fd" (differences by
    mujoco.minimize). settings: the Handle's (solver, ...). The model is left with its own values;
    the answer is in Result.x. executor: a contactkit.distributed.Executor built from this model:
    each trajectory's rollout (_Problem.rollout) runs on its workers, with the same answer.
    optimizer_options: passed to mujoco.minimize.least_squares over LM_OPTIONS (mu_factor 10:
    the regularizer grows tenfold after a rejected step, where mujoco.minimize's own 10^0.1 spends
    about 140 residual evaluations climbing to mu_max once the optimum is reached)."""
    options = dict(LM_OPTIONS, **(optimizer_options or {}))
    clash = {"bounds", "jacobian", "max_iter", "verbose", "residual", "x0"} & set(options)
    if clash:
        raise ValueError(f"optimizer_options cannot set {sorted(clash)}: they are identify's "
                         "own arguments")
    if jacobian not in ("analytic", "fd"):
        raise ValueError(f"jacobian must be 'analytic' or 'fd', got {jacobian!r}")
    if observe not in ("state", "sensors"):
        raise ValueError(f"observe must be 'state' or 'sensors', got {observe!r}")
    if horizon is not None and (not isinstance(horizon, int) or horizon < 1):
        raise ValueError(f"horizon must be a positive number of steps or None, got {horizon!r}")
    if not trajectories:
        raise ValueError("identify: at least one trajectory is needed")
    groups = _groups(model, list(params))
    handle = Handle(model, **settings)
    sensors = observe == "sensors"
    for tr in trajectories:
        _check_trajectory(model, tr, sensors)
    nobs = model.nsensordata if sensors else 2 * model.nv
    w = np.ones(nobs) if weights is None else np.asarray(weights, dtype=np.float64)
    if w.shape != (nobs,):
        raise ValueError(f"weights must have shape ({nobs},), got {w.shape}")
    if horizon is not None:
        trajectories = [win for tr in trajectories for win in windows(tr, horizon)]
    saved = [[get_param(model, p) for p in g] for g in groups]
    start = np.array([v[0] for v in saved] if x0 is None else x0, dtype=np.float64)
    if start.shape != (len(groups),):
        raise ValueError(f"x0 must have shape ({len(groups)},), got {start.shape}")
    if executor is None:
        problem = _Problem(model, handle, groups, list(trajectories), w, sensors, settings)
    else:
        problem = executor.sysid_problem(model, groups, list(trajectories), w, sensors, settings)
    t = time.perf_counter()
    try:
        x, trace = mujoco.minimize.least_squares(
            start, problem.residual, bounds=bounds,
            jacobian=problem.jacobian if jacobian == "analytic" else None,
            max_iter=max_iter, verbose=verbose, **options)
    finally:
        for g, values in zip(groups, saved):
            for p, v in zip(g, values):
                set_param(model, p, v)
        if any(ParamKind(p[0]) in _DERIVED for g in groups for p in g):
            mujoco.mj_setConst(model, mujoco.MjData(model))
    seconds = time.perf_counter() - t
    cost = float(trace[-1].objective) if trace else float("nan")
    return Result(np.asarray(x).ravel(), cost, len(trace), problem.rollouts, seconds)
