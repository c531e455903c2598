"""contactkit.distributed on a real two-node Ray cluster on the loopback address: rollouts,
Jacobians, data-set gradients and identify() give the single-process bits for any number of
workers and chunking; a killed worker's chunks are retried; a model that cannot be built fails
with the worker's message; batches stream in chunks.

The cluster: a head started by `ray start --head --block` and a second node process (what `ray
start --address` runs, ray._private.node.Node; the CLI itself cannot join on 127.0.0.1: with
Ray's cluster mode it rewrites 127.0.0.1 to the machine's external address, without it it refuses
a second node), both with node address 127.0.0.1 so that every Ray server listens on the
loopback only, temp dir under /tmp, no dashboard, no usage stats. Every process the fixture
started is killed at the end (by process group, then by pid from /proc) and checked gone.
"""

import os
import pathlib
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

import mujoco
import numpy as np
import pytest

import contactkit
from contactkit import distributed as ckd
from contactkit import sysid
from support import PENDULUM_XML, record_pendulum

ray = pytest.importorskip("ray", reason="Ray is not installed (tools/requirements.txt)")

ROOT = pathlib.Path(__file__).resolve().parents[2]
FULL = mujoco.mjtState.mjSTATE_FULLPHYSICS
MARK = "CK_RAY_TEST_CLUSTER"

# the second node: what `ray start --address=... --block` does once its arguments are parsed
NODE = """
import signal, sys
import ray._private.node, ray._private.parameter
gcs, tmp = sys.argv[1], sys.argv[2]
params = ray._private.parameter.RayParams(
    node_ip_address="127.0.0.1", gcs_address=gcs, num_cpus=1, object_store_memory=100_000_000,
    node_manager_port=0, dashboard_agent_listen_port=None, temp_dir=tmp)
node = ray._private.node.Node(params, head=False, shutdown_at_exit=True, spawn_reaper=False)
print("node started", flush=True)
signal.sigwait({signal.SIGTERM, signal.SIGINT})
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def ours(mark: str) -> list:
    """pids of the processes started with our marker in their environment"""
    pids = []
    for p in pathlib.Path("/proc").iterdir():
        if not p.name.isdigit() or int(p.name) == os.getpid():
            continue
        try:
            if f"{MARK}={mark}".encode() in (p / "environ").read_bytes().split(b"\0"):
                pids.append(int(p.name))
        except OSError:
            pass
    return pids


def alive(pid: int) -> bool:
    try:
        return pathlib.Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


@pytest.fixture(scope="module")
def cluster():
    tmp = tempfile.mkdtemp(prefix="ckray", dir="/tmp")
    env = dict(os.environ, RAY_USAGE_STATS_ENABLED="0", RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="0",
               RAY_TMPDIR=tmp, **{MARK: tmp})
    saved = {k: os.environ.get(k) for k in ("RAY_USAGE_STATS_ENABLED",
                                            "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER")}
    os.environ.update(RAY_USAGE_STATS_ENABLED="0", RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="0")
    # read when Ray is imported: without it ray.init turns 127.0.0.1 into the external address
    constants = ray._private.ray_constants
    cluster_mode, constants.ENABLE_RAY_CLUSTER = constants.ENABLE_RAY_CLUSTER, False
    port = free_port()
    ray_cli = str(pathlib.Path(sys.executable).parent / "ray")
    procs = []
    try:
        head = [ray_cli, "start", "--head", "--block", "--node-ip-address=127.0.0.1",
                f"--port={port}", "--num-cpus=1", f"--temp-dir={tmp}",
                "--include-dashboard=false", "--disable-usage-stats",
                "--object-store-memory=100000000"] + [
            f"--{flag}={free_port()}" for flag in (
                "node-manager-port", "object-manager-port", "dashboard-agent-listen-port",
                "dashboard-agent-grpc-port", "runtime-env-agent-port", "metrics-export-port")]
        procs.append(subprocess.Popen(head, env=env, start_new_session=True,
                                      stdout=open(f"{tmp}/head.out", "w"),
                                      stderr=subprocess.STDOUT))
        deadline = time.time() + 60
        while socket.socket().connect_ex(("127.0.0.1", port)) != 0:
            if time.time() > deadline or procs[0].poll() is not None:
                pytest.skip(f"Ray could not start a head node: "
                            f"{pathlib.Path(tmp, 'head.out').read_text()[-2000:]}")
            time.sleep(0.2)
        procs.append(subprocess.Popen([sys.executable, "-c", NODE, f"127.0.0.1:{port}", tmp],
                                      env=env, start_new_session=True,
                                      stdout=open(f"{tmp}/node.out", "w"),
                                      stderr=subprocess.STDOUT))
        ray.init(address=f"127.0.0.1:{port}", logging_level="ERROR", log_to_driver=False)
        while ray.cluster_resources().get("CPU", 0) < 2:
            if time.time() > deadline + 60 or procs[1].poll() is not None:
                pytest.skip(f"Ray's second node did not join: "
                            f"{pathlib.Path(tmp, 'node.out').read_text()[-2000:]}")
            time.sleep(0.2)
        yield tmp
    finally:
        if ray.is_initialized():
            ray.shutdown()
        for p in procs:
            for sig in (signal.SIGKILL,):
                try:
                    os.killpg(p.pid, sig)
                except ProcessLookupError:
                    pass
            p.wait(30)
        for _ in range(50):
            left = [pid for pid in ours(tmp) if alive(pid)]
            for pid in left:
                os.kill(pid, signal.SIGKILL)
            if not left:
                break
            time.sleep(0.1)
        constants.ENABLE_RAY_CLUSTER = cluster_mode
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        assert not [pid for pid in ours(tmp) if alive(pid)], "Ray processes left behind"
        shutil.rmtree(tmp, ignore_errors=True)  # Ray's logs and sockets (kept on a failure)


def hopper_batch(nbatch, nstep, seed=3):
    m = mujoco.MjModel.from_xml_path(str(ROOT / "mjcf_models" / "hopper.xml"))
    d = mujoco.MjData(m)
    rng = np.random.default_rng(seed)
    s0 = np.empty((nbatch, mujoco.mj_stateSize(m, FULL)))
    for i in range(nbatch):
        mujoco.mj_resetData(m, d)
        d.qvel[:] = 0.3 * rng.standard_normal(m.nv)
        mujoco.mj_getState(m, d, s0[i], FULL)
    return m, s0, rng.uniform(-1, 1, (nbatch, nstep, m.nu))


@pytest.fixture(scope="module")
def hopper(cluster):
    m, s0, u = hopper_batch(12, 60)
    ex = ckd.Executor(m, num_workers=2, cpus_per_worker=0.25, start_timeout=60,
                      chunk_timeout=60)
    yield m, s0, u, ex
    ex.shutdown()


PENDULUM = PENDULUM_XML
PARAMS = ["body:link:mass", "joint:hinge:damping"]


def record(model, push, steps=60):
    return record_pendulum(model, push, steps)


@pytest.fixture(scope="module")
def pendulum(cluster):
    model = mujoco.MjModel.from_xml_string(PENDULUM)
    trajectories = [record(model, push) for push in (1.0, 3.0, -2.0, 0.5)]
    ex = ckd.Executor(xml=PENDULUM, num_workers=2, cpus_per_worker=0.25, start_timeout=60,
                      chunk_timeout=60)
    yield model, trajectories, ex
    ex.shutdown()


LOOPBACK = {"0100007F", "0000000000000000FFFF00000100007F", "00000000000000000000000001000000"}


def listening(pids) -> list:
    """the local addresses (hex, as /proc/net/tcp*) of the TCP sockets pids listen on"""
    inodes = set()
    for pid in pids:
        try:
            for fd in os.listdir(f"/proc/{pid}/fd"):
                link = os.readlink(f"/proc/{pid}/fd/{fd}")
                if link.startswith("socket:["):
                    inodes.add(link[8:-1])
        except OSError:
            pass
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in pathlib.Path(table).read_text().splitlines()[1:]:
            cols = line.split()
            if cols[3] == "0A" and cols[9] in inodes:  # LISTEN
                found.append(cols[1])
    return found


def test_cluster_listens_on_the_loopback_only(cluster, hopper):
    addresses = listening(ours(cluster) + [os.getpid()])
    assert len(addresses) >= 6  # gcs, 2 raylets, workers, driver
    assert {a.split(":")[0] for a in addresses} <= LOOPBACK, addresses


def test_one_worker_gives_the_local_bits(cluster):
    m, s0, u = hopper_batch(5, 40)
    ref, ref_sens = contactkit.rollout(m, mujoco.MjData(m), s0, u, solver="lcp")
    # the model as a path each worker opens (the fixtures send an MjModel's MJB and MJCF text)
    with ckd.Executor(str(ROOT / "mjcf_models" / "hopper.xml"), num_workers=1,
                      cpus_per_worker=0.25, start_timeout=60, chunk_timeout=60) as ex:
        for chunk in (2, None):
            state, sens = ex.rollout(s0, u, solver="lcp", chunk_size=chunk)
            assert np.array_equal(state, ref) and np.array_equal(sens, ref_sens)
        assert ex.last_stats.chunks == 3 and ex.last_stats.retried == 0  # 2 + 2 + 1


def test_two_workers_on_two_nodes_give_the_local_bits(hopper):
    m, s0, u, ex = hopper
    infos = ex.workers()
    assert len({i["node_id"] for i in infos}) == 2  # one worker on each node
    assert all(i["node"] == "127.0.0.1" for i in infos)
    for solver in ("ipm", "lcp"):
        ref, _ = contactkit.rollout(m, mujoco.MjData(m), s0, u, solver=solver)
        assert np.isfinite(ref).all()
        for chunk in (1, 5, None):
            state, _ = ex.rollout(s0, u, solver=solver, chunk_size=chunk)
            assert np.array_equal(state, ref), (solver, chunk)
    # singleton inputs are tiled as contactkit.rollout does
    ref, _ = contactkit.rollout(m, mujoco.MjData(m), s0[:1], u[:, :1], nstep=20, solver="ipm")
    state, _ = ex.rollout(s0[:1], u[:, :1], nstep=20, solver="ipm", chunk_size=4)
    assert np.array_equal(state, ref)
    with pytest.raises(ValueError, match="initial_state"):
        ex.rollout(s0[:, :-1], u)
    with pytest.raises(ckd.WorkerError, match="worker .*kapa_tol") as err:
        ex.rollout(s0, u, kapa_tol=1)
    assert isinstance(err.value.cause, ValueError)


def test_jacobians_give_the_local_bits(hopper):
    m, s0, u, ex = hopper
    states, _ = contactkit.rollout(m, mujoco.MjData(m), s0[:2], u[:2], solver="comfree")
    xs, us = states[:, ::10].reshape(-1, s0.shape[1]), u[:2, ::10].reshape(-1, m.nu)
    ref = contactkit.transition_jacs(m, xs, us, solver="comfree")
    for chunk in (3, None):
        got = ex.transition_jacs(xs, us, solver="comfree", chunk_size=chunk)
        for a, b in zip(got, ref):
            assert np.array_equal(a, b)
    assert ex.last_jacobian_methods == contactkit.transition_jacs.last_methods


def test_streaming_in_chunks(hopper, tmp_path):
    m, s0, u, ex = hopper
    ref, _ = contactkit.rollout(m, mujoco.MjData(m), s0, u, solver="ipm")
    starts, parts = [], []
    for lo, state, _ in ex.iter_rollout(s0, u, solver="ipm", chunk_size=5):
        starts.append(lo)
        parts.append(state)
    assert starts == [0, 5, 10] and [len(p) for p in parts] == [5, 5, 2]
    assert np.array_equal(np.concatenate(parts), ref)
    assert ex.last_stats.chunks == 3 and ex.last_stats.max_in_flight <= 2 * ex.max_in_flight
    # into a memory map: a batch larger than memory never sits whole in the driver's RAM
    out = np.lib.format.open_memmap(tmp_path / "state.npy", mode="w+", shape=ref.shape)
    ex.rollout(s0, u, solver="ipm", chunk_size=4, state=out)
    assert np.array_equal(out, ref)


def test_killed_worker_is_retried_with_the_same_bits(hopper):
    m, s0, u, ex = hopper
    ref, _ = contactkit.rollout(m, mujoco.MjData(m), s0, u, solver="lcp")
    victim = ex.workers()[1]["pid"]
    killed = []

    def kill_once(done, total):
        if not killed:
            os.kill(victim, signal.SIGKILL)
            killed.append(done)

    state, _ = ex.rollout(s0, u, solver="lcp", chunk_size=1, progress=kill_once)
    assert killed and ex.last_stats.retried >= 1 and ex.last_stats.lost_workers == [1]
    assert np.array_equal(state, ref)
    # the lost worker was restarted and rebuilt its model
    assert ex.workers()[1]["pid"] != victim
    state, _ = ex.rollout(s0, u, solver="lcp", chunk_size=3)
    assert np.array_equal(state, ref) and ex.last_stats.retried == 0


def test_missing_asset_fails_with_the_workers_message(cluster):
    xml = """<mujoco><asset><mesh name="m" file="missing_part.stl"/></asset>
      <worldbody><body><freejoint/><geom type="mesh" mesh="m"/></body></worldbody></mujoco>"""
    t = time.time()
    with pytest.raises(ckd.WorkerError, match=r"worker \d .*could not build the model.*"
                                              r"missing_part\.stl"):
        ckd.Executor(xml=xml, num_workers=2, cpus_per_worker=0.25, start_timeout=60)
    assert time.time() - t < 60


def test_dataset_loss_and_gradient_give_the_local_bits(pendulum):
    model, trajectories, ex = pendulum
    x = np.array([0.9, 0.6])
    ref = ckd.loss_grad(model, PARAMS, trajectories, x, solver="mujoco")
    for chunk in (1, 3, None):
        value, grad = ex.loss_grad(PARAMS, trajectories, x, solver="mujoco", chunk_size=chunk)
        assert value == ref[0] and np.array_equal(grad, ref[1])
    # the gradient is the loss's: central differences of the local sum
    for k in range(2):
        e = np.zeros(2)
        e[k] = 1e-6
        fd = (ckd.loss_grad(model, PARAMS, trajectories, x + e, solver="mujoco")[0]
              - ckd.loss_grad(model, PARAMS, trajectories, x - e, solver="mujoco")[0]) / 2e-6
        assert abs(fd - ref[1][k]) <= 1e-5 * abs(ref[1][k])
    # and zero at the true parameters
    value, grad = ex.loss_grad(PARAMS, trajectories, [1.3, 0.3], solver="mujoco")
    assert value < 1e-20 and np.abs(grad).max() < 1e-9


def test_identify_over_the_executor_gives_the_local_answer(pendulum):
    model, trajectories, ex = pendulum
    kw = dict(x0=np.array([0.8, 0.9]), bounds=(np.array([0.1, 0.0]), np.array([5.0, 2.0])),
              solver="mujoco")
    for extra in ({}, {"observe": "sensors", "horizon": 25}):
        local = sysid.identify(model, PARAMS, trajectories, **kw, **extra)
        remote = sysid.identify(model, PARAMS, trajectories, executor=ex, **kw, **extra)
        assert np.array_equal(local.x, remote.x) and local.cost == remote.cost
        assert local.iterations == remote.iterations and local.rollouts == remote.rollouts
        np.testing.assert_allclose(remote.x, [1.3, 0.3], rtol=1e-3)
    # the workers' models keep their values: the loss at the truth is still zero
    assert ex.loss_grad(PARAMS, trajectories, [1.3, 0.3], solver="mujoco")[0] < 1e-20
