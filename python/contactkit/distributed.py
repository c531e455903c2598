"""contactkit.distributed: batched rollouts, Jacobians and data-set gradients on a Ray cluster.

An Executor holds one Ray actor per worker; each actor builds the model once (from MJCF text and
its assets, a path readable on its node, or a serialized MjModel) and keeps its MjData and
contactkit handles between calls::

    import contactkit.distributed as ckd
    with ckd.Executor(model, address="auto", num_workers=8) as ex:    # or xml=..., assets=...
        states, sensors = ex.rollout(state0, controls, solver="ipm")   # as contactkit.rollout
        A, B, C, D = ex.transition_jacs(states[0], controls[0])        # as transition_jacs
        value, grad = ex.loss_grad(params, trajectories, x)            # summed over the data set
        print(ex.last_stats)                                           # chunks, retried, ...

A batch is cut into chunks of chunk_size items in batch order (the same cut whatever the number of
workers); at most max_in_flight chunks per worker are queued, results are gathered as they arrive
(ray.wait) into their place, and sums run on the driver in item order, so every result is bit for
bit the single-process call's. A chunk lost with its worker (process killed, node lost) is sent
again to a surviving worker (the lost actor restarts and rebuilds its model) and counted in
last_stats.retried; an error raised by a worker (a model that cannot be built, bad settings) is
raised as WorkerError naming the worker and carrying its message; waits have timeouts.
"""

from __future__ import annotations

import collections
import dataclasses
import os
import time
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple

import mujoco
import numpy as np

from . import _rollout
from ._handle import Handle, parse_params

_FULLPHYSICS = int(mujoco.mjtState.mjSTATE_FULLPHYSICS)
_CTRL = int(mujoco.mjtState.mjSTATE_CTRL)
_MJB_NAME = "model.mjb"


class WorkerError(RuntimeError):
    """A worker failed: its error (worker index, node, pid and message; `cause` the exception it
    raised, e.g. ValueError for a bad setting), or lost chunks beyond max_retries."""

    def __init__(self, message: str, worker: Optional[int] = None,
                 cause: Optional[BaseException] = None):
        super().__init__(message)
        self.worker, self.cause = worker, cause


@dataclasses.dataclass
class CallStats:
    """What one call did: chunks run, chunks sent again after a lost worker (retried), the
    workers whose chunks were lost, the most chunks queued at once and the wall time (s)."""

    call: str = ""
    chunks: int = 0
    retried: int = 0
    lost_workers: List[int] = dataclasses.field(default_factory=list)
    max_in_flight: int = 0
    seconds: float = 0.0


def _ray():
    try:
        import ray
    except ImportError as e:  # pragma: no cover - Ray is in tools/requirements.txt
        raise ImportError("contactkit.distributed needs Ray: pip install ray") from e
    return ray


# ------------------------------------------------------------------------------ the model
def model_bytes(model: mujoco.MjModel) -> bytes:
    """model serialized as MuJoCo's binary MJB (mj_saveModel)"""
    buf = np.empty(mujoco.mj_sizeModel(model), dtype=np.uint8)
    mujoco.mj_saveModel(model, None, buf)
    return buf.tobytes()


def _source(model, xml, assets, path) -> Tuple[str, Any, Dict[str, bytes]]:
    """(kind, payload, assets) of the one model description given"""
    given = [g for g in (model, xml, path) if g is not None]
    if len(given) != 1:
        raise ValueError("give exactly one of model (MjModel, MJB bytes or path), xml or path")
    assets = dict(assets or {})
    if xml is not None:
        return "xml", str(xml), assets
    if path is not None or isinstance(model, (str, os.PathLike)):
        return "path", os.fspath(path if path is not None else model), assets
    if isinstance(model, mujoco.MjModel):
        return "mjb", model_bytes(model), assets
    if isinstance(model, (bytes, bytearray, memoryview)):
        return "mjb", bytes(model), assets
    raise TypeError(f"model: expected a mujoco.MjModel, MJB bytes or a path, got "
                    f"{type(model).__name__}")


def load_model(kind: str, payload: Any, assets: Dict[str, bytes]) -> mujoco.MjModel:
    """the MjModel of a description made by _source (what each worker runs)"""
    if kind == "xml":
        return mujoco.MjModel.from_xml_string(payload, assets or None)
    if kind == "mjb":
        return mujoco.MjModel.from_binary_path(_MJB_NAME, {**assets, _MJB_NAME: payload})
    if payload.endswith(".mjb"):
        return mujoco.MjModel.from_binary_path(payload, assets or None)
    return mujoco.MjModel.from_xml_path(payload, assets or None)


def _config(solver: Optional[str], settings: Dict[str, Any]) -> Dict[str, Any]:
    config = dict(settings)
    if solver is not None:
        config["solver"] = solver
    return config


def _key(config: Dict[str, Any]) -> tuple:
    return tuple(sorted((k, str(v)) for k, v in config.items()))


# ------------------------------------------------------------------- per-trajectory losses
def trajectory_loss_grad(model, handle, data, params, x: np.ndarray, traj, weights: np.ndarray):
    """(value, gradient (np,)) of one trajectory's loss 0.5 sum_t |w * r_t|^2 (r_t: simulated
    minus recorded state after step t, sysid's residual) in params (parsed) at x, by one reverse
    sweep (Handle.rollout_grad with params). The model gets its values back."""
    from . import sysid
    singles = [[p] for p in params]
    saved = [sysid.get_param(model, p) for p in params]
    nv, nx = model.nv, 2 * model.nv + model.na
    dq = np.zeros(nv)

    def loss(t, d):
        mujoco.mj_differentiatePos(model, dq, 1.0, traj.qpos[t], d.qpos)
        r = np.concatenate([dq, d.qvel - traj.qvel[t]]) * weights
        dx = np.zeros(nx)
        dx[:2 * nv] = r * weights
        return 0.5 * float(r @ r), dx, None

    try:
        sysid.set_params(model, singles, x, data)  # as identify: derived constants refreshed
        mujoco.mj_resetData(model, data)
        data.qpos[:], data.qvel[:] = traj.qpos0, traj.qvel0
        handle.reset()
        value, _, _, gp, _ = handle.rollout_grad(model, data, np.asarray(traj.ctrl), loss,
                                                 params=params)
    finally:
        sysid.set_params(model, singles, saved, data)
    return value, gp


def _sum_in_order(values: Sequence[float], grads: Sequence[np.ndarray]) -> Tuple[float, np.ndarray]:
    """the data set's sum, trajectory by trajectory in their order (the same bits everywhere)"""
    value, grad = 0.0, np.zeros_like(grads[0])
    for v, g in zip(values, grads):
        value += v
        grad += g
    return value, grad


def _weights(model_nv: int, weights) -> np.ndarray:
    w = np.ones(2 * model_nv) if weights is None else np.asarray(weights, dtype=np.float64)
    if w.shape != (2 * model_nv,):
        raise ValueError(f"weights must have shape ({2 * model_nv},), got {w.shape}")
    return w


def loss_grad(model: mujoco.MjModel, params, trajectories, x=None, weights=None,
              solver: Optional[str] = None, **settings) -> Tuple[float, np.ndarray]:
    """The single-process data-set loss and gradient that Executor.loss_grad distributes: the
    sum over trajectories (sysid.Trajectory) of 0.5 sum_t |weights * r_t|^2 and its gradient in
    params at x (default: the model's values). The model keeps its values."""
    from . import sysid
    parsed = parse_params(model, list(params))
    x = np.array([sysid.get_param(model, p) for p in parsed] if x is None else x, dtype=float)
    w = _weights(model.nv, weights)
    h, d = Handle(model, **_config(solver, settings)), mujoco.MjData(model)
    out = [trajectory_loss_grad(model, h, d, parsed, x, tr, w) for tr in trajectories]
    return _sum_in_order([v for v, _ in out], [g for _, g in out])


# --------------------------------------------------------------------------- the worker
class _Worker:
    """the body of each Ray actor: the model, one MjData and handles per settings, kept"""

    def __init__(self, index: int, kind: str, payload: Any, assets: Dict[str, bytes],
                 nthread: int):
        self.index, self.nthread = index, nthread
        self._source = (kind, payload, assets)
        self._model: Optional[mujoco.MjModel] = None
        self._datas: list = []
        self._handles: dict = {}

    def _where(self) -> str:
        import socket
        return f"worker {self.index} (pid {os.getpid()} on {socket.gethostname()})"

    def _build(self) -> mujoco.MjModel:
        if self._model is None:
            try:
                self._model = load_model(*self._source)
            except Exception as e:
                raise RuntimeError(f"{self._where()} could not build the model: {e}") from None
            self._datas = [mujoco.MjData(self._model) for _ in range(self.nthread)]
        return self._model

    def _handle(self, config: Dict[str, Any]) -> Handle:
        key = _key(config)
        if key not in self._handles:
            self._handles[key] = Handle(self._build(), **config)
        return self._handles[key]

    def info(self) -> dict:
        import ray
        m = self._build()
        sizes = {k: int(getattr(m, k)) for k in ("nq", "nv", "nu", "na", "nsensordata")}
        return {"pid": os.getpid(), "node": ray.util.get_node_ip_address(),
                "node_id": ray.get_runtime_context().get_node_id(), "sizes": sizes,
                "nstate": mujoco.mj_stateSize(m, _FULLPHYSICS)}

    def parse(self, params) -> list:
        return parse_params(self._build(), params)

    def cpu_seconds(self) -> float:
        return time.process_time()

    def state_size(self, spec: int) -> int:
        return mujoco.mj_stateSize(self._build(), spec)

    def param_values(self, params) -> List[float]:
        from . import sysid
        return [sysid.get_param(self._build(), p) for p in params]

    def rollout(self, s0, w0, u, nstep: int, spec: int, config: Dict[str, Any]):
        m = self._build()
        return _rollout.rollout(m, self._datas, s0, u, control_spec=spec, nstep=nstep,
                                initial_warmstart=w0, **config)

    def transition_jacs(self, x, u, config: Dict[str, Any]):
        m, d, h = self._build(), self._datas[0], self._handle(config)
        T, nx = len(x), 2 * m.nv + m.na
        A, B = np.empty((T, nx, nx)), np.empty((T, nx, m.nu))
        C, D = np.empty((T, m.nsensordata, nx)), np.empty((T, m.nsensordata, m.nu))
        methods = []
        for i in range(T):
            mujoco.mj_setState(m, d, x[i], _FULLPHYSICS)
            d.ctrl[:] = u[i]
            h.reset()
            h.transition_jac(m, d, A[i], B[i], C[i], D[i])
            methods.append(h.last_jacobian_method)
        return A, B, C, D, methods

    def loss_grad(self, params, x, trajectories, weights, config: Dict[str, Any]):
        m, h = self._build(), self._handle(config)
        return [trajectory_loss_grad(m, h, self._datas[0], params, x, tr, weights)
                for tr in trajectories]

    def residuals(self, groups, X, trajectories, weights, sensors: bool, jac: bool,
                  config: Dict[str, Any]):
        """identify's residuals at each column of X (np, K), or with jac its Jacobian at X[:, 0],
        per trajectory (sysid._Problem.rollout); the model gets its values back"""
        from . import sysid
        m = self._build()
        problem = sysid._Problem(m, self._handle(config), groups, [], weights, sensors)
        saved = [sysid.get_param(m, p) for p in problem.flat]
        try:
            if jac:
                return [problem.rollout(X[:, 0], tr, True)[1] for tr in trajectories]
            return [np.stack([problem.rollout(X[:, k], tr, False)[0]
                              for k in range(X.shape[1])], axis=1) for tr in trajectories]
        finally:
            sysid.set_params(m, [[p] for p in problem.flat], saved, problem.data)


# ------------------------------------------------------------------------- the executor
_LOST = None  # the Ray exceptions meaning "the worker or its result is gone" (set on first use)


def _lost_errors(ray) -> tuple:
    global _LOST
    if _LOST is None:
        ex = ray.exceptions
        names = ("RayActorError", "WorkerCrashedError", "ObjectLostError", "OwnerDiedError",
                 "NodeDiedError", "LocalRayletDiedError", "OutOfMemoryError")
        _LOST = tuple(getattr(ex, n) for n in names if hasattr(ex, n))
    return _LOST


class Executor:
    """Ray actors that each hold the model, and contactkit's batched calls split over them.

    Args:
      model: a mujoco.MjModel (sent as MJB bytes), MJB bytes, or a path (.xml or .mjb) that
        every worker's node can read; or xml: MJCF text; assets: {name: bytes} for either.
      address: the Ray cluster ("auto", "host:port"); None: the cluster this process is already
        connected to, else a local one started here (and stopped by shutdown()).
      num_workers: actors (default: the cluster's CPUs / threads_per_worker), spread over nodes.
      threads_per_worker: the threads of each actor's rollouts.
      cpus_per_worker: the CPUs each actor reserves in Ray (default threads_per_worker; less
        lets more actors share a node, e.g. several executors at once).
      chunk_size: items per task (default: the batch over 4 tasks per worker, at most 256).
      max_in_flight: chunks queued on one worker at a time (bounds worker and driver memory).
      max_retries: times one chunk is sent again after its worker was lost.
      max_restarts: times Ray restarts a lost actor (it rebuilds its model on its next call).
      start_timeout, chunk_timeout: seconds to wait for the workers to start and build the model,
        and for any chunk to finish (TimeoutError otherwise).
    Raises WorkerError (naming the worker and with its message) when a worker cannot build the
    model, TimeoutError when workers do not start (e.g. the cluster lacks the CPUs).
    """

    def __init__(self, model=None, *, xml: Optional[str] = None,
                 assets: Optional[Dict[str, bytes]] = None, path=None,
                 address: Optional[str] = None, num_workers: Optional[int] = None,
                 threads_per_worker: int = 1, cpus_per_worker: Optional[float] = None,
                 chunk_size: Optional[int] = None,
                 max_in_flight: int = 2, max_retries: int = 3, max_restarts: int = 3,
                 start_timeout: float = 120.0, chunk_timeout: float = 600.0,
                 runtime_env: Optional[dict] = None):
        ray = _ray()
        kind, payload, assets = _source(model, xml, assets, path)
        for name, v in (("threads_per_worker", threads_per_worker),
                        ("max_in_flight", max_in_flight)):
            if v < 1:
                raise ValueError(f"{name} must be >= 1, got {v}")
        self._owns_ray = False
        if not ray.is_initialized():
            kwargs = {"include_dashboard": False} if address is None else {}
            ray.init(address=address, runtime_env=runtime_env, logging_level="WARNING", **kwargs)
            self._owns_ray = True
        cpus = float(threads_per_worker if cpus_per_worker is None else cpus_per_worker)
        if num_workers is None:
            num_workers = max(1, int(ray.cluster_resources().get("CPU", 1) // max(cpus, 1)))
        if num_workers < 1:
            raise ValueError(f"num_workers must be >= 1, got {num_workers}")
        self.chunk_size, self.max_in_flight = chunk_size, max_in_flight
        self.max_retries, self.chunk_timeout = max_retries, chunk_timeout
        self.last_stats = CallStats()
        self.last_jacobian_methods: list = []
        self._spec_sizes: Dict[int, int] = {}
        cls = ray.remote(num_cpus=cpus, max_restarts=max_restarts,
                         max_task_retries=0)(_Worker)
        # kept: a restarted actor is built again from them
        self._refs = refs = ray.put(payload), ray.put(assets)
        self._actors = [cls.options(scheduling_strategy="SPREAD").remote(
            k, kind, refs[0], refs[1], threads_per_worker) for k in range(num_workers)]
        try:
            self._infos = self._start(start_timeout)
        except BaseException:
            self.shutdown()
            raise
        info = self._infos[0]
        self.sizes, self.nstate = dict(info["sizes"]), info["nstate"]
        self._spec_sizes[_FULLPHYSICS] = self.nstate

    @property
    def num_workers(self) -> int:
        return len(self._actors)

    def _start(self, timeout: float) -> list:
        ray = _ray()
        refs = [a.info.remote() for a in self._actors]
        ready, _ = ray.wait(refs, num_returns=len(refs), timeout=timeout)
        infos = []
        for k, ref in enumerate(refs):
            if ref not in ready:
                raise TimeoutError(
                    f"worker {k} did not start within {timeout:g} s (cluster resources: "
                    f"{ray.available_resources()}); fewer num_workers or a larger cluster")
            infos.append(self._get(ref, k))
        return infos

    def _get(self, ref, worker: int):
        """ray.get of one result, an error raised by the worker as WorkerError with its message"""
        ray = _ray()
        try:
            return ray.get(ref, timeout=self.chunk_timeout)
        except ray.exceptions.RayTaskError as e:
            cause = getattr(e, "cause", None)
            text = str(cause or e)
            where = "" if text.startswith(f"worker {worker} ") else f"worker {worker}: "
            raise WorkerError(where + text, worker, cause) from None

    def workers(self) -> List[dict]:
        """each worker's pid, node address and model sizes (asked now: a restarted worker has a
        new pid)"""
        return self._ask_all("info")

    def cpu_seconds(self) -> List[float]:
        """each worker process's CPU time so far (s; its Ray threads included)"""
        return self._ask_all("cpu_seconds")

    def _ask_all(self, method: str) -> list:
        """every worker's answer to method(), waiting for a restarting worker (up to
        chunk_timeout)"""
        ray = _ray()
        deadline = time.monotonic() + self.chunk_timeout
        answers = []
        for k, actor in enumerate(self._actors):
            while True:
                try:
                    answers.append(self._get(getattr(actor, method).remote(), k))
                    break
                except ray.exceptions.ActorUnavailableError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.1)
        return answers

    def shutdown(self) -> None:
        """kill the actors; disconnect from Ray if this executor connected"""
        ray = _ray()
        for a in getattr(self, "_actors", []):
            try:
                ray.kill(a, no_restart=True)
            except Exception:  # noqa: BLE001 - already gone
                pass
        self._actors = []
        if self._owns_ray and ray.is_initialized():
            ray.shutdown()
        self._owns_ray = False

    def __enter__(self) -> "Executor":
        return self

    def __exit__(self, *exc) -> None:
        self.shutdown()

    # --------------------------------------------------------------------- scheduling
    def _chunking(self, n: int, chunk_size: Optional[int]) -> List[Tuple[int, int]]:
        size = chunk_size or self.chunk_size
        if size is None:
            size = min(256, max(1, -(-n // (4 * self.num_workers))))
        if size < 1:
            raise ValueError(f"chunk_size must be >= 1, got {size}")
        return [(lo, min(n, lo + size)) for lo in range(0, n, size)]

    def _run(self, call: str, nchunk: int, submit: Callable[[Any, int], Any],
             progress: Optional[Callable[[int, int], None]] = None) -> Iterator[Tuple[int, Any]]:
        """(chunk, result) in the order they arrive; submit(actor, chunk) starts one task. At most
        max_in_flight chunks per worker are queued, and none more than that many chunks ahead of
        the first unfinished one; a chunk lost with its worker goes to another."""
        ray = _ray()
        stats = self.last_stats = CallStats(call=call, chunks=nchunk)
        t0 = time.perf_counter()
        pending = collections.deque(range(nchunk))
        attempts = [0] * nchunk
        inflight: Dict[Any, Tuple[int, int]] = {}
        load = [0] * self.num_workers
        lost: set = set()
        done = [False] * nchunk
        first, ndone = 0, 0
        ahead = 2 * self.max_in_flight * self.num_workers
        while ndone < nchunk:
            while pending and pending[0] < first + ahead:
                live = [k for k in range(self.num_workers) if k not in lost] or \
                    list(range(self.num_workers))
                k = min(live, key=lambda j: load[j])
                if load[k] >= self.max_in_flight:
                    break
                i = pending.popleft()
                inflight[submit(self._actors[k], i)] = (i, k)
                load[k] += 1
            stats.max_in_flight = max(stats.max_in_flight, len(inflight))
            ready, _ = ray.wait(list(inflight), num_returns=1, timeout=self.chunk_timeout)
            if not ready:
                raise TimeoutError(f"{call}: no chunk finished within {self.chunk_timeout:g} s")
            i, k = inflight.pop(ready[0])
            load[k] -= 1
            try:
                value = self._get(ready[0], k)
            except _lost_errors(ray) as e:
                attempts[i] += 1
                stats.retried += 1
                lost.add(k)
                if attempts[i] > self.max_retries:
                    raise WorkerError(f"{call}: chunk {i} lost {attempts[i]} times, last on "
                                      f"worker {k}: {e}", k) from None
                pending.appendleft(i)
                continue
            done[i] = True
            ndone += 1
            while first < nchunk and done[first]:
                first += 1
            if progress is not None:
                progress(ndone, nchunk)
            yield i, value
        stats.lost_workers = sorted(lost)
        stats.seconds = time.perf_counter() - t0

    def _state_size(self, spec: int) -> int:
        if spec not in self._spec_sizes:
            self._spec_sizes[spec] = self._get(self._actors[0].state_size.remote(spec), 0)
        return self._spec_sizes[spec]

    # -------------------------------------------------------------------------- calls
    def _rollout_plan(self, initial_state, control, control_spec, nstep, initial_warmstart,
                      chunk_size, config):
        """(nbatch, nstep, chunks, submit) of a rollout, inputs checked as contactkit.rollout"""
        nv = self.sizes["nv"]
        s0, u, w0, nbatch, nstep = _rollout.check_batch(
            self.nstate, self._state_size(int(control_spec)), nv, initial_state, control,
            initial_warmstart, nstep)
        chunks = self._chunking(nbatch, chunk_size)

        def part(a, lo, hi, shape):
            if a is None:
                return None
            rows = a[lo:hi] if a.shape[0] == nbatch else a
            return np.ascontiguousarray(np.broadcast_to(rows, (hi - lo,) + shape))

        def submit(actor, i):
            lo, hi = chunks[i]
            uc = None if u is None else part(u, lo, hi, (nstep, u.shape[2]))
            return actor.rollout.remote(part(s0, lo, hi, (self.nstate,)),
                                        part(w0, lo, hi, (nv,)), uc, nstep, int(control_spec),
                                        config)

        return nbatch, nstep, chunks, submit

    def iter_rollout(self, initial_state: Any, control: Any = None, *,
                     control_spec: int = _CTRL, nstep: Optional[int] = None,
                     initial_warmstart: Any = None, chunk_size: Optional[int] = None,
                     progress=None, solver: Optional[str] = None, **settings):
        """rollout's chunks as they are ready, in batch order: (start, state (n, nstep, nstate),
        sensordata (n, nstep, nsensordata)); at most max_in_flight chunks per worker are queued,
        so batches larger than a worker's (or the driver's) memory stream through."""
        _, _, chunks, submit = self._rollout_plan(initial_state, control, control_spec, nstep,
                                                  initial_warmstart, chunk_size,
                                                  _config(solver, settings))
        ready: Dict[int, Any] = {}
        nxt = 0
        for i, value in self._run("rollout", len(chunks), submit, progress):
            ready[i] = value
            while nxt in ready:
                state, sens = ready.pop(nxt)
                yield chunks[nxt][0], state, sens
                nxt += 1

    def rollout(self, initial_state: Any, control: Any = None, *, control_spec: int = _CTRL,
                nstep: Optional[int] = None, initial_warmstart: Any = None,
                state: Optional[np.ndarray] = None, sensordata: Optional[np.ndarray] = None,
                chunk_size: Optional[int] = None, progress=None, solver: Optional[str] = None,
                **settings) -> Tuple[np.ndarray, np.ndarray]:
        """contactkit.rollout's arguments and outputs (without model and data: the workers'),
        split in chunks over the workers; the same bits. state / sensordata may be given (e.g.
        numpy memmaps for batches larger than memory); progress(done, total) after each chunk."""
        nbatch, nstep, chunks, submit = self._rollout_plan(
            initial_state, control, control_spec, nstep, initial_warmstart, chunk_size,
            _config(solver, settings))
        out = _rollout.outputs(state, sensordata, (nbatch, nstep, self.nstate),
                               (nbatch, nstep, self.sizes["nsensordata"]))
        for i, (st, se) in self._run("rollout", len(chunks), submit, progress):
            lo, hi = chunks[i]
            out["state"][lo:hi], out["sensordata"][lo:hi] = st, se
        return out["state"], out["sensordata"]

    def transition_jacs(self, states: Any, controls: Any = None, *,
                        chunk_size: Optional[int] = None, progress=None,
                        solver: Optional[str] = None, **settings):
        """contactkit.transition_jacs at a batch of states (T, nstate) with controls (T, nu), over
        the workers: A (T, nx, nx), B (T, nx, nu), C (T, nsensordata, nx), D (T, nsensordata,
        nu); last_jacobian_methods: "analytic" or "finite_differences" per state."""
        sz = self.sizes
        x = np.asarray(states, dtype=np.float64)
        if x.ndim != 2 or x.shape[1] != self.nstate:
            raise ValueError(f"states: expected shape (T, {self.nstate}), got {x.shape}")
        T, nu, ns = x.shape[0], sz["nu"], sz["nsensordata"]
        u = np.zeros((T, nu)) if controls is None else np.asarray(controls, dtype=np.float64)
        if u.shape != (T, nu):
            raise ValueError(f"controls: expected shape ({T}, {nu}), got {u.shape}")
        nx = 2 * sz["nv"] + sz["na"]
        A, B = np.empty((T, nx, nx)), np.empty((T, nx, nu))
        C, D = np.empty((T, ns, nx)), np.empty((T, ns, nu))
        methods: list = [None] * T
        chunks = self._chunking(T, chunk_size)
        config = _config(solver, settings)

        def submit(actor, i):
            lo, hi = chunks[i]
            return actor.transition_jacs.remote(x[lo:hi], u[lo:hi], config)

        for i, (a, b, c, d, m) in self._run("transition_jacs", len(chunks), submit, progress):
            lo, hi = chunks[i]
            A[lo:hi], B[lo:hi], C[lo:hi], D[lo:hi] = a, b, c, d
            methods[lo:hi] = m
        self.last_jacobian_methods = methods
        return A, B, C, D

    def _parse(self, params) -> list:
        """(kind, id, index) of each parameter: names are parsed by worker 0's model"""
        if isinstance(params, (str, tuple)):
            params = [params]
        params = list(params)
        if all(isinstance(p, tuple) and len(p) == 3 for p in params) and params:
            return [tuple(int(v) for v in p) for p in params]
        return self._get(self._actors[0].parse.remote(params), 0)

    def _trajectory_chunks(self, trajectories, chunk_size):
        ray = _ray()
        chunks = self._chunking(len(trajectories), chunk_size)
        return chunks, [ray.put(list(trajectories[lo:hi])) for lo, hi in chunks]

    def loss_grad(self, params, trajectories, x=None, weights=None, *,
                  chunk_size: Optional[int] = None, progress=None, solver: Optional[str] = None,
                  **settings) -> Tuple[float, np.ndarray]:
        """distributed.loss_grad over the workers: the data set's loss and its gradient in params
        at x (default: the model's values), summed on the driver in trajectory order (the same
        bits as the local call)."""
        trajectories = list(trajectories)
        if not trajectories:
            raise ValueError("loss_grad: at least one trajectory is needed")
        parsed = self._parse(params)
        if x is None:
            x = self._get(self._actors[0].param_values.remote(parsed), 0)
        x = np.asarray(x, dtype=np.float64)
        if x.shape != (len(parsed),):
            raise ValueError(f"x must have shape ({len(parsed)},), got {x.shape}")
        w = _weights(self.sizes["nv"], weights)
        chunks, refs = self._trajectory_chunks(trajectories, chunk_size)
        config = _config(solver, settings)
        per: list = [None] * len(trajectories)

        def submit(actor, i):
            return actor.loss_grad.remote(parsed, x, refs[i], w, config)

        for i, values in self._run("loss_grad", len(chunks), submit, progress):
            per[chunks[i][0]:chunks[i][1]] = values
        return _sum_in_order([v for v, _ in per], [g for _, g in per])

    def sysid_problem(self, model, groups, trajectories, weights, sensors, settings):
        """what sysid.identify(executor=self) evaluates: residual(X) and jacobian(X, r) with
        the trajectories' rollouts on the workers (sysid._Problem.rollout on each)"""
        for k, v in self.sizes.items():
            if int(getattr(model, k)) != v:
                raise ValueError(f"executor: its workers' model has {k} = {v}, the model given "
                                 f"{int(getattr(model, k))}; build the executor from this model")
        return _SysidProblem(self, groups, trajectories, weights, sensors, dict(settings))


class _SysidProblem:
    """sysid._Problem's interface (residual, jacobian, rollouts) over an Executor"""

    def __init__(self, ex: Executor, groups, trajectories, weights, sensors, settings):
        self.ex, self.groups, self.weights, self.sensors = ex, groups, weights, sensors
        self.config = settings
        self.n = len(trajectories)
        self.chunks, self.refs = ex._trajectory_chunks(trajectories, None)
        self.rollouts = 0

    def _per_trajectory(self, X: np.ndarray, jac: bool) -> list:
        out: list = [None] * self.n
        X = np.ascontiguousarray(X, dtype=np.float64)

        def submit(actor, i):
            return actor.residuals.remote(self.groups, X, self.refs[i], self.weights,
                                          self.sensors, jac, self.config)

        for i, parts in self.ex._run("sysid", len(self.chunks), submit):
            out[self.chunks[i][0]:self.chunks[i][1]] = parts
        self.rollouts += self.n * (1 if jac else X.shape[1])
        return out

    def residual(self, x: np.ndarray) -> np.ndarray:
        per = self._per_trajectory(x, False)
        return np.stack([np.concatenate([r[:, k] for r in per]) for k in range(x.shape[1])],
                        axis=1)

    def jacobian(self, x: np.ndarray, r: np.ndarray) -> np.ndarray:
        return np.vstack(self._per_trajectory(x, True))
