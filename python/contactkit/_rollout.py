"""Batched rollouts and Jacobians on a pool of threads, one handle and one MjData per thread."""

from __future__ import annotations

import concurrent.futures
import threading
import weakref
from typing import Any, Optional, Sequence, Tuple, Union

import mujoco
import numpy as np

from . import _core
from ._handle import Handle, _check_model

_FULLPHYSICS = int(mujoco.mjtState.mjSTATE_FULLPHYSICS)
_CTRL = int(mujoco.mjtState.mjSTATE_CTRL)

# handles reused across calls: data -> (settings key, handle)
_cache: "weakref.WeakKeyDictionary[mujoco.MjData, Tuple[Any, Handle]]" = weakref.WeakKeyDictionary()
_cache_lock = threading.Lock()
# extra MjData made for nthread > len(data): model -> list of data
_extra: "weakref.WeakKeyDictionary[mujoco.MjModel, list]" = weakref.WeakKeyDictionary()


def _handle_for(model: mujoco.MjModel, data: mujoco.MjData, config: dict) -> Handle:
    key = tuple(sorted((k, str(v)) for k, v in config.items()))
    with _cache_lock:
        entry = _cache.get(data)
        if entry is None or entry[0] != key or not entry[1]._core.same_model(model._address):
            entry = (key, Handle(model, **config))
            _cache[data] = entry
        return entry[1]


def _datas(model: mujoco.MjModel, data: Union[mujoco.MjData, Sequence[mujoco.MjData]],
           nthread: Optional[int]) -> list:
    datas = [data] if isinstance(data, mujoco.MjData) else list(data)
    if not datas:
        raise ValueError("data: at least one mujoco.MjData is needed")
    for d in datas:
        if not isinstance(d, mujoco.MjData):
            raise TypeError(f"data: expected mujoco.MjData, got {type(d).__name__}")
    if nthread is not None:
        if nthread < 1:
            raise ValueError(f"nthread must be >= 1, got {nthread}")
        with _cache_lock:
            extra = _extra.setdefault(model, [])
            while len(datas) + len(extra) < nthread:
                extra.append(mujoco.MjData(model))
        datas = (datas + extra)[:nthread]
    return datas


def _batch(name: str, a: Any, ndim: int, tail: Tuple[int, ...]) -> Optional[np.ndarray]:
    """a as float64 of shape (batch, ..., *tail) with ndim dims, leading singletons added"""
    if a is None:
        return None
    a = np.asarray(a, dtype=np.float64)
    while a.ndim < ndim:
        a = a[None]
    if a.ndim != ndim or a.shape[ndim - len(tail):] != tail:
        raise ValueError(f"{name}: expected shape (..., {', '.join(map(str, tail))}) with "
                         f"{ndim} dimensions, got {a.shape}")
    return a


def check_batch(nstate: int, ncontrol: int, nv: int, initial_state, control, initial_warmstart,
                nstep: Optional[int]):
    """rollout's inputs as float64 batches (s0, u, w0; None where not given), the batch size and
    the number of steps, or ValueError naming the mismatch"""
    s0 = _batch("initial_state", initial_state, 2, (nstate,))
    u = _batch("control", control, 3, (ncontrol,))
    w0 = _batch("initial_warmstart", initial_warmstart, 2, (nv,))
    nbatch = max(x.shape[0] for x in (s0, u, w0) if x is not None)
    if nstep is None:
        if u is None:
            raise ValueError("nstep is required when no control is given")
        nstep = u.shape[1]
    if nstep < 0:
        raise ValueError(f"nstep must be >= 0, got {nstep}")
    for name, x in (("initial_state", s0), ("control", u), ("initial_warmstart", w0)):
        if x is not None and x.shape[0] not in (1, nbatch):
            raise ValueError(f"{name}: batch size {x.shape[0]}, expected 1 or {nbatch}")
    if u is not None and u.shape[1] not in (1, nstep):
        raise ValueError(f"control: {u.shape[1]} steps, expected 1 or nstep = {nstep}")
    return s0, u, w0, nbatch, nstep


def outputs(state, sensordata, state_shape, sensor_shape) -> dict:
    """rollout's outputs: the caller's arrays checked, or new ones"""
    out = {"state": state, "sensordata": sensordata}
    for name, shape in (("state", state_shape), ("sensordata", sensor_shape)):
        if out[name] is None:
            out[name] = np.empty(shape)
        elif not isinstance(out[name], np.ndarray) or out[name].shape != shape:
            raise ValueError(f"{name}: expected a float64 array of shape {shape}")
    return out


def rollout(model: mujoco.MjModel, data: Union[mujoco.MjData, Sequence[mujoco.MjData]],
            initial_state: Any, control: Any = None, *, control_spec: int = _CTRL,
            nstep: Optional[int] = None, initial_warmstart: Any = None,
            state: Optional[np.ndarray] = None, sensordata: Optional[np.ndarray] = None,
            nthread: Optional[int] = None, solver: Optional[str] = None,
            **settings: Any) -> Tuple[np.ndarray, np.ndarray]:
    """Roll out open-loop trajectories with contactkit's step: mujoco.rollout.rollout's
    arguments and outputs, on one model.

    Args:
      model: the MjModel (one model for the whole batch).
      data: an MjData or a sequence of them, one per thread (nthread: threads wanted; extra MjData
        are made and kept for later calls).
      initial_state: ([nbatch or 1] x nstate) full-physics states (mj_getState,
        mjSTATE_FULLPHYSICS).
      control: ([nbatch or 1] x [nstep or 1] x ncontrol) inputs of control_spec per step.
      nstep: steps per rollout (inferred from control when not given).
      initial_warmstart: ([nbatch or 1] x nv) qacc_warmstart at the start (None: zero).
      state, sensordata: optional output arrays (nbatch x nstep x nstate / nsensordata).
      solver, **settings: the handles' settings (as Handle); none: each model's own.
    Returns:
      state (nbatch x nstep x nstate) and sensordata (nbatch x nstep x nsensordata).
    Each rollout starts from a reset handle, so results do not depend on the number of threads.
    """
    _check_model(model)
    nstate = _core.state_size(model._address, _FULLPHYSICS)
    ncontrol = _core.state_size(model._address, int(control_spec))
    s0, u, w0, nbatch, nstep = check_batch(nstate, ncontrol, model.nv, initial_state, control,
                                           initial_warmstart, nstep)
    s0 = np.ascontiguousarray(np.broadcast_to(s0, (nbatch, nstate)))
    if u is not None:
        u = np.ascontiguousarray(np.broadcast_to(u, (nbatch, nstep, ncontrol)))
    if w0 is not None:
        w0 = np.ascontiguousarray(np.broadcast_to(w0, (nbatch, model.nv)))
    out = outputs(state, sensordata, (nbatch, nstep, nstate), (nbatch, nstep, model.nsensordata))
    config = dict(settings)
    if solver is not None:
        config["solver"] = solver
    datas = _datas(model, data, nthread)
    handles = [_handle_for(model, d, config) for d in datas]
    for d, h in zip(datas, handles):
        if not h._core.same_model(d.model._address):
            raise ValueError("data: an MjData of another model than `model`")
    _core.rollout(model._address, [h._core for h in handles], [d._address for d in datas], nbatch,
                  nstep, int(control_spec), s0, w0, u, out["state"], out["sensordata"])
    return out["state"], out["sensordata"]


def transition_jacs(model: mujoco.MjModel, states: Any, controls: Any = None, *,
                    nthread: Optional[int] = None, solver: Optional[str] = None,
                    **settings: Any) -> Tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Transition Jacobians (Handle.transition_jac) at a batch of states, on a pool of threads.

    Args:
      states: (T x nstate) full-physics states (mj_getState, mjSTATE_FULLPHYSICS).
      controls: (T x nu) controls (None: zero).
      nthread: threads (default: 1); solver, **settings: as Handle.
    Returns:
      A (T x nx x nx), B (T x nx x nu), C (T x nsensordata x nx), D (T x nsensordata x nu),
      nx = 2 nv + na.
    """
    _check_model(model)
    nstate = _core.state_size(model._address, _FULLPHYSICS)
    x = np.asarray(states, dtype=np.float64)
    if x.ndim != 2 or x.shape[1] != nstate:
        raise ValueError(f"states: expected shape (T, {nstate}), got {x.shape}")
    T = x.shape[0]
    u = np.zeros((T, model.nu)) if controls is None else np.asarray(controls, dtype=np.float64)
    if u.shape != (T, model.nu):
        raise ValueError(f"controls: expected shape ({T}, {model.nu}), got {u.shape}")
    nthread = 1 if nthread is None else nthread
    if nthread < 1:
        raise ValueError(f"nthread must be >= 1, got {nthread}")
    nx = 2 * model.nv + model.na
    A, B = np.empty((T, nx, nx)), np.empty((T, nx, model.nu))
    C, D = np.empty((T, model.nsensordata, nx)), np.empty((T, model.nsensordata, model.nu))
    config = dict(settings)
    if solver is not None:
        config["solver"] = solver
    workers = [(mujoco.MjData(model), Handle(model, **config))
               for _ in range(min(nthread, max(T, 1)))]
    counter = iter(range(T))
    lock = threading.Lock()
    methods = [None] * T

    def work(k: int) -> None:
        d, h = workers[k]
        while True:
            with lock:
                i = next(counter, None)
            if i is None:
                return
            mujoco.mj_setState(model, d, x[i], _FULLPHYSICS)
            d.ctrl[:] = u[i]
            h.reset()
            h.transition_jac(model, d, A[i], B[i], C[i], D[i])
            methods[i] = h.last_jacobian_method

    if len(workers) == 1:
        work(0)
    else:
        with concurrent.futures.ThreadPoolExecutor(len(workers)) as pool:
            list(pool.map(work, range(len(workers))))
    transition_jacs.last_methods = methods
    return A, B, C, D
