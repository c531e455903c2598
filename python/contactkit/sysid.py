"""System identification on trajectory residuals with contactkit's parameter Jacobians.

identify() fits model parameters (the names of Handle.param_jac: "body:box:mass",
"geom:floor:friction:0", "joint:hinge:damping", "actuator:motor:gainprm:0", "gravity:2", ...) to
recorded trajectories: each trajectory starts from its recorded initial state, replays its
controls, and its residual is the difference between the simulated and the recorded state after
every step (positions in the tangent space, then velocities), scaled by the caller's weights.
Box-bounded Levenberg-Marquardt (mujoco.minimize.least_squares) minimizes the sum of squares.

Its Jacobian comes from forward sensitivities along each rollout, S_{t+1} = A_t S_t + P_t, with
A_t = Handle.transition_jac and P_t = Handle.param_jac at the state before step t (one rollout
per evaluation, whatever the number of parameters), or, with jacobian="fd", from
mujoco.minimize's finite differences (one rollout per parameter), the scheme of mujoco.sysid.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Optional, Sequence

import mujoco
import mujoco.minimize
import numpy as np

from ._handle import Handle, ParamKind, parse_params

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
    """A recording: the initial state, the controls of each step (T, nu) and the state after each
    step: qpos (T, nq), qvel (T, nv)."""

    qpos0: np.ndarray
    qvel0: np.ndarray
    ctrl: np.ndarray
    qpos: np.ndarray
    qvel: np.ndarray


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


def set_param(model: mujoco.MjModel, param, value: float) -> None:
    """write a parsed parameter (kind, id, index) into the model"""
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

    def __init__(self, model, handle, params, trajectories, weights):
        self.model, self.handle, self.params = model, handle, params
        self.trajectories = trajectories
        self.weights = weights
        self.data = mujoco.MjData(model)
        self.rollouts = 0

    def rollout(self, x: np.ndarray, traj: Trajectory, jac: bool):
        m, d, h = self.model, self.data, self.handle
        for p, v in zip(self.params, x):
            set_param(m, p, v)
        mujoco.mj_resetData(m, d)
        d.qpos[:], d.qvel[:] = traj.qpos0, traj.qvel0
        h.reset()
        nv, npar = m.nv, len(self.params)
        S = np.zeros((2 * nv + m.na, npar))
        res, rows = [], []
        dq = np.zeros(nv)
        for t in range(len(traj.ctrl)):
            d.ctrl[:] = traj.ctrl[t]
            if jac:
                A = h.transition_jac(m, d)[0]
                P = h.param_jac(m, d, self.params)[0]
                S = A @ S + P
            h.step(m, d)
            mujoco.mj_differentiatePos(m, dq, 1.0, traj.qpos[t], d.qpos)
            res.append(np.concatenate([dq, d.qvel - traj.qvel[t]]) * self.weights)
            if jac:
                rows.append(S[:2 * nv] * self.weights[:, None])
        self.rollouts += 1
        return np.concatenate(res), (np.vstack(rows) if jac else None)

    def residual(self, x: np.ndarray) -> np.ndarray:
        cols = []
        for k in range(x.shape[1]):
            cols.append(np.concatenate([self.rollout(x[:, k], tr, False)[0]
                                        for tr in self.trajectories]))
        return np.stack(cols, axis=1)

    def jacobian(self, x: np.ndarray, r: np.ndarray) -> np.ndarray:
        return np.vstack([self.rollout(x[:, 0], tr, True)[1] for tr in self.trajectories])


def identify(model: mujoco.MjModel, params: Sequence, trajectories: Sequence[Trajectory],
             x0: Optional[np.ndarray] = None, bounds: Optional[Sequence[np.ndarray]] = None,
             weights: Optional[np.ndarray] = None, jacobian: str = "analytic",
             max_iter: int = 50, verbose: int = 0, **settings) -> Result:
    """Fit params (names or (kind, id, index)) to trajectories, starting from x0 (default: the
    model's values) within bounds (lower, upper). weights (2 nv,) scale the residual's position
    and velocity components. jacobian: "analytic" (contactkit's sensitivities) or "fd"
    (differences by mujoco.minimize). settings: the Handle's (solver, ...). The model is left
    with its own values; the answer is in Result.x."""
    if jacobian not in ("analytic", "fd"):
        raise ValueError(f"jacobian must be 'analytic' or 'fd', got {jacobian!r}")
    if not trajectories:
        raise ValueError("identify: at least one trajectory is needed")
    parsed = parse_params(model, list(params))
    handle = Handle(model, **settings)
    for tr in trajectories:
        T = len(tr.ctrl)
        shapes = {"qpos0": (model.nq,), "qvel0": (model.nv,), "ctrl": (T, model.nu),
                  "qpos": (T, model.nq), "qvel": (T, model.nv)}
        for name, shape in shapes.items():
            got = np.shape(getattr(tr, name))
            if got != shape:
                raise ValueError(f"trajectory {name} must have shape {shape}, got {got}")
    w = np.ones(2 * model.nv) if weights is None else np.asarray(weights, dtype=np.float64)
    if w.shape != (2 * model.nv,):
        raise ValueError(f"weights must have shape ({2 * model.nv},), got {w.shape}")
    saved = [get_param(model, p) for p in parsed]
    start = np.array(saved if x0 is None else x0, dtype=np.float64)
    problem = _Problem(model, handle, parsed, list(trajectories), w)
    t = time.perf_counter()
    try:
        x, trace = mujoco.minimize.least_squares(
            start, problem.residual, bounds=bounds,
            jacobian=problem.jacobian if jacobian == "analytic" else None,
            max_iter=max_iter, verbose=verbose)
    finally:
        for p, v in zip(parsed, saved):
            set_param(model, p, v)
    seconds = time.perf_counter() - t
    cost = float(trace[-1].objective) if trace else float("nan")
    return Result(np.asarray(x).ravel(), cost, len(trace), problem.rollouts, seconds)
