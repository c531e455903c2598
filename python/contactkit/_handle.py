"""contactkit.Handle: one solver workspace for one (model, data) pair, as ckHandle in C."""

from __future__ import annotations

import dataclasses
import enum
import weakref
from typing import Any, Mapping, Optional

import mujoco
import numpy as np

from . import _core

class Fallback(enum.IntEnum):
    """Why a Jacobian came from finite differences (ckFallback); `fallback_text` says it in words."""

    NONE = 0  # analytic, or no Jacobian (the call failed)
    ROWS = 1  # more constraint rows than the handle's capacity
    SOFT_HESSIAN = 2  # the Hessian of MuJoCo's solver is not positive definite
    IMPLICIT = 3  # M - h qDeriv of the implicit integrator is singular
    NO_TANGENT = 4  # the solver has no analytic force tangent for this problem
    RK4_POSITION = 5  # lcp's position correction (split impulse) under RK4
    NOSLIP = 6  # noslip iterations
    FLUID_IMPLICIT = 7  # fluid forces under the implicit integrators
    JDOTV = 8  # MuJoCo 3.7+'s Jdot v in connect and weld rows' reference
    ADAPTIVE = 9  # an adaptive step (tsit5, dopri5) that fails or takes over 1024 internal steps


class ParamKind(enum.IntEnum):
    """Kinds of model parameters of Handle.param_jac (ckParamKind)."""

    BODY_MASS = 0
    BODY_IPOS = 1
    BODY_INERTIA = 2
    GEOM_FRICTION = 3
    GEOM_SIZE = 4
    GEOM_POS = 5
    GEOM_SOLREF = 6
    GEOM_SOLIMP = 7
    DOF_DAMPING = 8
    DOF_ARMATURE = 9
    JNT_STIFFNESS = 10
    DOF_FRICTIONLOSS = 11
    ACTUATOR_GAINPRM = 12
    ACTUATOR_BIASPRM = 13
    GRAVITY = 14


def parse_params(model: mujoco.MjModel, params) -> list:
    """(kind, id, index) of each parameter given as a name ("body:box:mass", ck_parseParam's
    syntax) or a tuple; ValueError naming what is supported for a bad one, or for none"""
    if isinstance(params, (str, tuple)):
        params = [params]
    parsed = []
    for p in params:
        if isinstance(p, str):
            parsed.append(tuple(_core.parse_param(model._address, p)))
        else:
            if len(p) != 3:
                raise ValueError(f"parameter {p!r}: expected (kind, id, index)")
            kind, oid, index = (int(x) for x in p)
            _core.check_param(model._address, kind, oid, index)
            parsed.append((kind, oid, index))
    if not parsed:
        raise ValueError("at least one parameter is needed")
    return parsed


def fallback_text(reason: int) -> str:
    """One line saying what a Fallback means (ck_fallbackText; "" for NONE)."""
    texts = _core.fallback_texts()
    if not 0 <= int(reason) < len(texts):
        raise ValueError(f"no fallback reason {reason}; allowed 0 .. {len(texts) - 1}")
    return texts[int(reason)]


def _text(value: Any) -> str:
    """A setting value as the C API's text (bool: 0/1, sequences: space separated)."""
    if isinstance(value, (bool, np.bool_)):
        return "1" if value else "0"
    if isinstance(value, (list, tuple, np.ndarray)):
        return " ".join(repr(float(v)) for v in np.asarray(value, dtype=float).ravel())
    if isinstance(value, float):
        return repr(value)
    return str(value)


def _value(text: str) -> Any:
    """A setting's text as int, float, tuple of floats or str."""
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    parts = text.split()
    if len(parts) > 1:
        try:
            return tuple(float(p) for p in parts)
        except ValueError:
            pass
    return text


def _settings_dict(raw: Mapping[str, str]) -> dict:
    return {k: _value(v) for k, v in raw.items()}


def setting_keys() -> dict:
    """Every setting key with its one-line documentation."""
    return dict(_core.setting_keys())


def solver_available(name: str) -> bool:
    """True if solver `name` ("mujoco", "ipm", "comfree", "lcp") is in this build."""
    return bool(_core.solver_available(name))


def settings_from_model(model: mujoco.MjModel) -> dict:
    """The settings a model names (plugin tag or <custom> fields) on top of the defaults.

    Raises ValueError naming the key and where it was given on bad input."""
    _check_model(model)
    return _settings_dict(_core.settings_from_model(model._address))


def _vector(v, n: int, name: str):
    """v as a contiguous float64 vector of shape (n,), or None; ValueError naming it otherwise."""
    if v is None:
        return None
    v = np.ascontiguousarray(v, dtype=np.float64)
    if v.shape != (n,):
        raise ValueError(f"{name} must have shape ({n},), got {v.shape}")
    return v


def _check_model(model: Any) -> None:
    if not isinstance(model, mujoco.MjModel):
        raise TypeError(f"expected a mujoco.MjModel, got {type(model).__name__}")


@dataclasses.dataclass(frozen=True)
class Stats:
    """Statistics of the last forward pass (ckStats)."""

    solver: str  # solver that produced the forces
    status: int  # ckStatus of the last solve (0 solved, 1 inaccurate, 2 max_iter, 3 numerical, 4 invalid input)
    iterations: int  # solver iterations
    nrow: int  # constraint rows in contact frames
    ncon: int  # contacts included in the problem
    nisland: int  # independent groups of interacting trees
    residual: float  # final residual (solver-specific norm)
    kappa: float  # final complementarity / central-path value (ipm, lcp)
    condition: float  # conditioning estimate of the last factorization (0: unknown)
    max_penetration: float  # largest penetration among included contacts (m)
    solve_time: float  # wall time of the constraint stage (s)


@dataclasses.dataclass(frozen=True)
class Totals:
    """Counters of a handle since it was made (ckTotals; reset() keeps them)."""

    solves: int  # constraint solves (one per forward or step; RK4: one per stage)
    inexact: int  # of those, the ones whose status was not 0 (solved)
    guess_hits: int  # lcp: solves whose active-set guess was accepted on every island
    guess_tries: int  # lcp: solves where a guess was tried
    nwarning: int  # warnings the handle has raised


_SIZE_NAMES = ("nq", "nv", "nu", "na", "nbody", "njnt", "ngeom", "nsite", "neq", "ntendon", "nsensor",
               "nsensordata")


def _sizes(model: mujoco.MjModel) -> tuple:
    return tuple(int(getattr(model, k)) for k in _SIZE_NAMES)


def _mismatch(own: tuple, model: mujoco.MjModel) -> str:
    """What differs between the handle's model sizes and model's, for an error message."""
    other = _sizes(model)
    diff = [f"{k} {a} here, {b} given" for k, a, b in zip(_SIZE_NAMES, own, other) if a != b]
    if diff:
        return "; ".join(diff) + "; make one handle per model"
    return "same sizes, different structure (joints, contacts or constraints); make one handle per model"


class Handle:
    """The workspace of one contactkit solver for one mujoco.MjData (use one per data and thread).

    Args:
      model: the mujoco.MjModel the handle is for; any model it is later used with must have the
        same structure.
      solver: "mujoco", "ipm", "comfree" or "lcp"; None keeps the model's choice (default "mujoco").
      **settings: any C setting key (see `setting_keys()`), e.g. kappa_tol=1e-8. With neither
        solver nor settings the handle takes its settings from the model, as ck_make(m, NULL).
        Given keys apply on top of the model's own settings.

    Raises:
      ValueError: an unknown key or a bad value (the message names it and what is allowed).
      TypeError: model is not a mujoco.MjModel.
    """

    def __init__(self, model: mujoco.MjModel, solver: Optional[str] = None, **settings: Any):
        _check_model(model)
        if solver is not None:
            settings = {"solver": solver, **settings}
        self._core = _core.Handle(model._address, {k: _text(v) for k, v in settings.items()})
        self._model_address = model._address
        self._model_sizes = _sizes(model)
        self._data_ref: Optional[weakref.ref] = None
        self._data_address = 0
        self.last_jacobian_method: Optional[str] = None
        self.last_jacobian_reason: str = ""
        self.last_jacobian_fallback: Fallback = Fallback.NONE

    # ------------------------------------------------------------------------------- checks
    def _require_model(self, model: Any) -> None:
        """Raise unless model is the one the handle was made for (ck_sameModel)."""
        _check_model(model)
        if not self._core.same_model(model._address):
            raise ValueError(f"this handle was made for another model ({_mismatch(self._model_sizes, model)})")

    def _check(self, model: Any, data: Any) -> None:
        if not isinstance(model, mujoco.MjModel) or model._address != self._model_address:
            self._require_model(model)
            self._model_address = model._address
            self._data_ref = None
        if self._data_ref is None or self._data_ref() is not data or data._address != self._data_address:
            if not isinstance(data, mujoco.MjData):
                raise TypeError(f"expected a mujoco.MjData, got {type(data).__name__}")
            if not self._core.same_model(data.model._address):
                raise ValueError(f"data belongs to another model than the handle's "
                                 f"({_mismatch(self._model_sizes, data.model)})")
            self._data_ref = weakref.ref(data)
            self._data_address = data._address

    # ----------------------------------------------------------------------------- pipeline
    def step(self, model: mujoco.MjModel, data: mujoco.MjData, nstep: int = 1) -> None:
        """Replace mujoco.mj_step: nstep steps with the handle's solver (GIL released)."""
        self._check(model, data)
        if nstep < 0:
            raise ValueError(f"nstep must be >= 0, got {nstep}")
        self._core.step(model._address, data._address, int(nstep))

    def forward(self, model: mujoco.MjModel, data: mujoco.MjData) -> None:
        """Replace mujoco.mj_forward."""
        self._check(model, data)
        self._core.forward(model._address, data._address)

    def reset(self) -> None:
        """Forget warm starts and contact anchors; call after mj_resetData or a jump of state."""
        self._core.reset()

    # ----------------------------------------------------------------------------- settings
    @property
    def settings(self) -> dict:
        """Every setting with its current value."""
        return _settings_dict(self._core.settings())

    def set(self, model: Optional[mujoco.MjModel] = None, **settings: Any) -> None:
        """Change settings between steps (solver switch included); validated first.

        model is needed only when turning gap_recheck on or changing cfd_width after a
        derivative call (the first derivative call makes the derivative workspace). Raises
        ValueError and keeps the previous settings on bad input."""
        address = 0
        if model is not None:
            self._require_model(model)
            address = model._address
        self._core.set(address, {k: _text(v) for k, v in settings.items()})

    @property
    def stats(self) -> Stats:
        """Statistics of the last forward pass."""
        return Stats(**self._core.stats())

    @property
    def totals(self) -> Totals:
        """Counters since the handle was made."""
        return Totals(**self._core.totals())

    @property
    def solver_info(self) -> dict:
        """What the last forward pass's solver reports beyond stats (ckSolverInfo): "solver" and
        ipm: retries, lifts, factorizations, sym_fallbacks, warm_islands, rechecks, holds,
        dissipated, prox_solved; lcp: pivots, guess_tried, guess_hit, budget_spent; comfree:
        facets, active, capped; nothing more for "mujoco"."""
        return self._core.solver_info()

    @property
    def step_info(self) -> dict:
        """The internal steps of the last step with an adaptive integrator (setting `integrator`
        tsit5 or dopri5; ckStepInfo): integrator, status ("ok", "max_steps", "min_step"),
        accepted, rejected, min_step, max_step, error (scaled, <= 1), next_step (s)."""
        return self._core.step_info()

    # -------------------------------------------------------------------------- derivatives
    def _outputs(self, model, A, B, C, D):
        nx = 2 * model.nv + model.na
        shapes = {"A": (nx, nx), "B": (nx, model.nu), "C": (model.nsensordata, nx),
                  "D": (model.nsensordata, model.nu)}
        given = {"A": A, "B": B, "C": C, "D": D}
        if all(v is None for v in given.values()):
            given = {k: np.zeros(s) for k, s in shapes.items()}
        for k, v in given.items():
            if v is None:
                continue
            if not isinstance(v, np.ndarray) or v.dtype != np.float64 or not v.flags.c_contiguous:
                raise TypeError(f"{k} must be a C-contiguous float64 numpy array")
            if v.shape != shapes[k]:
                raise ValueError(f"{k} must have shape {shapes[k]}, got {v.shape}")
        return given

    def _method(self, rc: int, what: str) -> None:
        reason = self._core.last_error()
        if rc == -2:
            raise ValueError(f"{what}: the state is one MuJoCo would reset: {reason}")
        if rc < 0:
            raise RuntimeError(f"{what} failed: {reason}")
        self.last_jacobian_method = "analytic" if rc == 0 else "finite_differences"
        self.last_jacobian_reason = reason
        self.last_jacobian_fallback = Fallback(self._core.last_fallback())

    def transition_jac(self, model: mujoco.MjModel, data: mujoco.MjData, A=None, B=None, C=None,
                       D=None, direction=None):
        """Jacobians of the step `step` would take, with mjd_transitionFD's shapes and meaning.

        A (2nv+na, 2nv+na) = d next state / d state, B (2nv+na, nu) = d next state / d ctrl,
        C (nsensordata, 2nv+na), D (nsensordata, nu) for the sensors; state = [dqpos (tangent),
        qvel, act]. Arrays given are written in place (others are not computed); with none
        given all four are returned newly allocated. `last_jacobian_method` says whether the
        analytic path ("analytic") or finite differences through the step
        ("finite_differences") produced them, `last_jacobian_fallback` (a Fallback) and
        `last_jacobian_reason` (in words) why differences were used.
        data is left unchanged. Raises ValueError for a state MuJoCo would reset (NaN, inf or
        huge values), RuntimeError (with the reason) when the handle cannot differentiate.
        With solver "ipm" the Jacobian is a smoothed gradient taken at kappa_grad (default
        1e-4), not the derivative of the step solved to kappa_tol (10-100% away from finite
        differences on contact); set kappa_grad=kappa_tol for the exact derivative of the step.
        direction (2nv+na,) (ck_transitionJacAware): the adjoint of the next state, e.g. iLQR's
        cost-to-go gradient. With solver "lcp", the Jacobians of the complementarity-aware
        classification: contacts the direction would pull apart are treated as separating (and
        separated ones it pushes together as sticking), kept when Nimble's score prefers them,
        so that direction @ [A B] equals transition_vjp(direction) with complementarity_aware
        on. With "comfree", a contact the direction pulls apart keeps its force fixed in the
        tangent; with "ipm" its impulse is held fixed (and a contact the step left open that the
        direction pushes together has its normal velocity clamped); with "mujoco" its rows leave
        the soft tangent's active set. For ipm and mujoco the direction's classification is kept
        whenever it changes a contact (no score). None or RK4: the plain Jacobians.
        """
        self._check(model, data)
        out = self._outputs(model, A, B, C, D)
        if direction is None:
            rc = self._core.transition_jac(model._address, data._address, out["A"], out["B"],
                                           out["C"], out["D"])
        else:
            direction = _vector(direction, 2 * model.nv + model.na, "direction")
            rc = self._core.transition_jac_aware(model._address, data._address, direction,
                                                 out["A"], out["B"], out["C"], out["D"])
        self._method(rc, "transition_jac")
        return out["A"], out["B"], out["C"], out["D"]

    def param_jac(self, model: mujoco.MjModel, data: mujoco.MjData, params):
        """Jacobians of the step `step` would take with respect to model parameters (ck_paramJac).

        params: a list of names such as "geom:box:friction:0", "body:box:mass", "joint:hinge:
        damping", "actuator:servo:gainprm:0", "gravity:2" (ck_parseParam's syntax), or tuples
        (kind, id, index) with kind a ParamKind or its number. Returns (DxDp, DsDp, how):
        DxDp (2nv+na, np) d next state / d p in transition_jac's state layout, DsDp
        (nsensordata, np) d sensors / d p, how (np,) int: 0 analytic (implicit function theorem
        through the solver's force tangent), 1 central differences of the step. model and data
        are left unchanged. Raises ValueError naming what is supported for an unknown or
        out-of-range parameter."""
        self._check(model, data)
        parsed = parse_params(model, params)
        n = len(parsed)
        dxdp = np.zeros((2 * model.nv + model.na, n))
        dsdp = np.zeros((model.nsensordata, n))
        how = np.zeros(n, dtype=np.intc)
        rc = self._core.param_jac(model._address, data._address, parsed, dxdp, dsdp, how)
        self._method(rc, "param_jac")
        return dxdp, dsdp, how

    def transition_vjp(self, model: mujoco.MjModel, data: mujoco.MjData, dx=None, ds=None):
        """Vector-Jacobian product of the step without forming Jacobians.

        dx (2nv+na,) adjoint of the next state, ds (nsensordata,) adjoint of the sensors (None:
        zero). Returns gx = A' dx + C' ds (2nv+na,) and gu = B' dx + D' ds (nu,)."""
        self._check(model, data)
        nx = 2 * model.nv + model.na
        dx, ds = _vector(dx, nx, "dx"), _vector(ds, model.nsensordata, "ds")
        gx, gu = np.zeros(nx), np.zeros(model.nu)
        rc = self._core.transition_vjp(model._address, data._address, dx, ds, gx, gu)
        self._method(rc, "transition_vjp")
        return gx, gu

    def rollout_grad(self, model: mujoco.MjModel, data: mujoco.MjData, ctrl, loss, params=None):
        """Reverse mode over an open-loop rollout (ck_rolloutGrad).

        Steps data len(ctrl) times with the controls ctrl (nstep, nu). After step t, calls
        loss(t, data): data then holds the state after the step and the sensors of the step; loss
        returns (value, dx, ds): the step's loss, its gradient with respect to that state
        ((2nv+na,), mjd_transitionFD's tangent layout) and to the sensors ((nsensordata,)); dx and
        ds may be None (zero). One backward sweep of vector-Jacobian products then gives the
        gradient of the summed loss. Returns (value, gx0 (2nv+na,), gu (nstep, nu)); data ends
        at the final state. comfree with anchors is refused (set anchor = 0).

        params (names or (kind, id, index) tuples, as param_jac): also the loss's gradient with
        respect to those model parameters (ck_rolloutGradParam); returns then (value, gx0, gu,
        gp (np,), how (np,) int: 1 where some step's parameter Jacobian used central
        differences, as param_jac's how). Costs one parameter Jacobian per step on top of the
        sweep. The model is left unchanged."""
        self._check(model, data)
        parsed = [] if params is None else parse_params(model, params)
        ctrl = np.ascontiguousarray(ctrl, dtype=np.float64)
        if ctrl.ndim != 2 or ctrl.shape[1] != model.nu:
            raise ValueError(f"ctrl must have shape (nstep, {model.nu}), got {ctrl.shape}")
        nstep, nx, ns = ctrl.shape[0], 2 * model.nv + model.na, model.nsensordata

        def call(t):
            out = loss(t, data)
            if not isinstance(out, tuple) or len(out) != 3:
                raise TypeError("loss(t, data) must return (value, dx, ds); dx and ds may be None")
            value, dx, ds = out
            where = f"loss at step {t}: "
            return float(value), _vector(dx, nx, where + "dx"), _vector(ds, ns, where + "ds")

        value, gx, gu = np.zeros(1), np.zeros(nx), np.zeros((nstep, model.nu))
        gp, how = np.zeros(len(parsed)), np.zeros(len(parsed), dtype=np.intc)
        rc = self._core.rollout_grad(model._address, data._address, nstep, ctrl, call, value, gx,
                                     gu, parsed, gp, how)
        self._method(rc, "rollout_grad")
        if params is None:
            return float(value[0]), gx, gu
        return float(value[0]), gx, gu, gp, how

    def transition_fd(self, model: mujoco.MjModel, data: mujoco.MjData, eps: float = 1e-6,
                      centered: bool = False, A=None, B=None, C=None, D=None):
        """Finite-difference Jacobians through `step` with mjd_transitionFD's conventions."""
        self._check(model, data)
        if not eps > 0:
            raise ValueError(f"eps must be > 0, got {eps}")
        out = self._outputs(model, A, B, C, D)
        rc = self._core.transition_fd(model._address, data._address, float(eps), bool(centered),
                                      out["A"], out["B"], out["C"], out["D"])
        if rc < 0:
            reason = self._core.last_error()
            raise (ValueError if rc == -2 else RuntimeError)(f"transition_fd failed: {reason}")
        return out["A"], out["B"], out["C"], out["D"]
