"""python -m contactkit.bench: the Python package's speed, as ratios measured in one process.

  rollout    contactkit.rollout (solver "mujoco") against mujoco.rollout.rollout, one thread
  threads    contactkit.rollout speedup from 1 to 2 threads on a batch of 64
  step       Handle.step per call against mujoco.mj_step, one step per call
  gym        Gymnasium environments' steps per second, unpatched and patched with each solver
  ray        contactkit.distributed: 1,024 humanoid rollouts of 500 steps on 1 and 2 Ray workers
             against contactkit.rollout on 1 and 2 local threads, and Ray's cost per chunk
             (--address: a running cluster; default: a local one on this machine; not in `all`)
  mjx-toss   DiffMJX's cube toss (Fig. 5): gradient error and time of MJX (jax.grad through
             mjx.step, semi-implicit Euler) beside contactkit's Euler and tsit5 (ck_rolloutGrad),
             against a tsit5 reference at 1e-12; needs `pip install mujoco-mjx` (not in `all`)
  sysid      system identification beside mujoco.sysid: a tossed cube (friction, half-size,
             mass) and the Franka Panda (joint damping and armature, a link's mass), parameter
             errors and wall time of each method on the same data and start (not in `all`)

Models: MuJoCo's humanoid (--mujoco-models, default $CK_MUJOCO_MODELS or Debian's
/usr/share/mujoco/model) and the Franka Panda from the Menagerie (--menagerie, default
../shared/models beside the repository); absent models are skipped and named.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import time

import mujoco
import mujoco.rollout
import numpy as np

import contactkit

FULL = mujoco.mjtState.mjSTATE_FULLPHYSICS


def best_time(fn, repeat: int) -> float:
    """the fastest of `repeat` runs (s): the least disturbed by other load"""
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def batch(model, nbatch, nstep, seed=0):
    d = mujoco.MjData(model)
    rng = np.random.default_rng(seed)
    s0 = np.empty((nbatch, mujoco.mj_stateSize(model, FULL)))
    for i in range(nbatch):
        mujoco.mj_resetData(model, d)
        if model.nkey:
            mujoco.mj_resetDataKeyframe(model, d, 0)
        d.qvel[:] += 0.1 * rng.standard_normal(model.nv)
        mujoco.mj_getState(model, d, s0[i], FULL)
    lo, hi = model.actuator_ctrlrange[:, 0], model.actuator_ctrlrange[:, 1]
    limited = model.actuator_ctrllimited.astype(bool)
    lo = np.where(limited, lo, -1.0)
    hi = np.where(limited, hi, 1.0)
    u = rng.uniform(lo, hi, (nbatch, nstep, model.nu))
    return s0, u


def diverged(states) -> bool:
    """non-finite or exploding states (a diverged run's time is not reported)"""
    return not np.isfinite(states).all() or np.abs(states).max() > 1e6


def bench_rollout(models, nbatch, nstep, repeat):
    rows = []
    for name, m in models.items():
        s0, u = batch(m, nbatch, nstep)
        d = mujoco.MjData(m)
        ours = best_time(lambda: contactkit.rollout(m, d, s0, u, solver="mujoco"), repeat)
        theirs = best_time(lambda: mujoco.rollout.rollout(m, d, s0, u), repeat)
        if diverged(contactkit.rollout(m, d, s0, u, solver="mujoco")[0]):
            rows.append((f"rollout/{name}", f"{nbatch}x{nstep}", theirs, float("nan"),
                         float("nan"), "DIVERGED"))
            continue
        rows.append((f"rollout/{name}", f"{nbatch}x{nstep}", theirs, ours, ours / theirs,
                     "<= 1.1"))
    return rows


def bench_threads(models, nstep, repeat):
    rows = []
    for name, m in models.items():
        s0, u = batch(m, 64, nstep)
        datas = [mujoco.MjData(m), mujoco.MjData(m)]
        for solver in ("mujoco", "ipm"):
            one = best_time(lambda: contactkit.rollout(m, datas[:1], s0, u, solver=solver), repeat)
            two = best_time(lambda: contactkit.rollout(m, datas, s0, u, solver=solver), repeat)
            if diverged(contactkit.rollout(m, datas, s0, u, solver=solver)[0]):
                rows.append((f"threads/{name}/{solver}", f"64x{nstep}", float("nan"),
                             float("nan"), float("nan"), "DIVERGED"))
                continue
            rows.append((f"threads/{name}/{solver}", f"64x{nstep}", one, two, one / two,
                         ">= 1.8 (speedup)"))
    return rows


def bench_step(models, nstep, repeat):
    rows = []
    for name, m in models.items():
        d = mujoco.MjData(m)
        h = contactkit.Handle(m, solver="mujoco", derivatives=False)

        def plain():
            for _ in range(nstep):
                mujoco.mj_step(m, d)

        def ours():
            for _ in range(nstep):
                h.step(m, d)

        mujoco.mj_resetData(m, d)
        plain()  # settle into contact
        t_plain = best_time(plain, repeat)
        t_ours = best_time(ours, repeat)
        if diverged(np.concatenate([d.qpos, d.qvel])):
            rows.append((f"step/{name}", f"{nstep} calls", float("nan"), float("nan"),
                         float("nan"), "DIVERGED"))
            continue
        rows.append((f"step/{name}", f"{nstep} calls", t_plain, t_ours, t_ours / t_plain,
                     "<= 1.2"))
    return rows


def bench_gym(nstep, repeat):
    try:
        import gymnasium as gym
    except ImportError:
        print("gym: gymnasium is not installed (pip install 'gymnasium[mujoco]'); skipped")
        return []
    rows = []
    for env_name in ("Hopper-v5", "Ant-v5", "Humanoid-v5"):
        def run():
            env = gym.make(env_name)
            env.reset(seed=0)
            rng = np.random.default_rng(0)
            lo, hi = env.action_space.low, env.action_space.high
            t = time.perf_counter()
            for _ in range(nstep):
                _, _, term, trunc, _ = env.step(rng.uniform(lo, hi))
                if term or trunc:
                    env.reset()
            dt = time.perf_counter() - t
            env.close()
            return dt

        base = min(run() for _ in range(repeat))
        for solver in ("mujoco", "ipm", "comfree", "lcp"):
            with contactkit.patched(solver=solver):
                t = min(run() for _ in range(repeat))
            rows.append((f"gym/{env_name}/{solver}", f"{nstep} env steps", base, t, t / base,
                         f"{nstep / base:.0f} -> {nstep / t:.0f} steps/s"))
    return rows


# DiffMJX's cube toss (the model of ck-bench diffmjx-toss): 10 cm, 1 kg, tilted, 0.3 m over a
# floor with stiff soft contact; refsafe off so that every integrator simulates the same contact
TOSS_XML = """
<mujoco>
  <option><flag refsafe="disable"/></option>
  <worldbody>
    <geom type="plane" size="10 10 0.1" solref="0.005 1" solimp="0 0.95 0.001 0.5 2"/>
    <body pos="0 0 0.3" euler="20 30 0">
      <freejoint/>
      <geom type="box" size="0.05 0.05 0.05" mass="1" solref="0.005 1"
            solimp="0 0.95 0.001 0.5 2"/>
    </body>
  </worldbody>
</mujoco>"""
TOSS_V0 = np.array([-2.0, 0, 0, 0, 0, 0])


def toss_contactkit(h, integrator, tol, horizon, v0, grad=True):
    """contactkit's loss (final x) and its gradient in the initial velocity; times (s)"""
    m = mujoco.MjModel.from_xml_string(TOSS_XML)
    m.opt.timestep, m.opt.tolerance, m.opt.iterations = h, 1e-14, 200
    settings = {} if integrator == "model" else {"rtol": tol, "atol": tol, "min_step": 1e-14,
                                                  "max_steps": 100000}
    ck = contactkit.Handle(m, solver="mujoco", integrator=integrator, **settings)
    d = mujoco.MjData(m)
    nstep = int(round(horizon / h))

    def start():
        mujoco.mj_resetData(m, d)
        d.qvel[:] = v0
        ck.reset()

    def forward():
        start()
        for _ in range(nstep):
            ck.step(m, d)
        return d.qpos[0]

    t = time.perf_counter()
    loss = forward()
    t_fwd = time.perf_counter() - t
    if not grad:
        return loss, None, t_fwd, None
    dx = np.zeros(2 * m.nv)
    dx[0] = 1

    def final_x(k, data):
        return (data.qpos[0], dx, None) if k == nstep - 1 else (0.0, None, None)

    start()
    t = time.perf_counter()
    _, gx, _ = ck.rollout_grad(m, d, np.zeros((nstep, 0)), final_x)
    return loss, gx[m.nv:], t_fwd, time.perf_counter() - t


def toss_mjx(h, horizon, v0):
    """MJX's loss and jax.grad, times of the compiled calls and of their compilation (s)"""
    import jax
    from mujoco import mjx
    m = mujoco.MjModel.from_xml_string(TOSS_XML)
    # MJX's solver loop is a while_loop, which jax.grad cannot reverse unless it runs once
    # (mujoco issue 2259): one Newton iteration per step, as MJX's gradients are taken today
    m.opt.timestep, m.opt.iterations = h, 1
    mx = mjx.put_model(m)
    nstep = int(round(horizon / h))

    def final_x(v):
        d = mjx.make_data(mx).replace(qvel=v)
        d, _ = jax.lax.scan(lambda d, _: (mjx.step(mx, d), None), d, None, length=nstep)
        return d.qpos[0]

    f, g = jax.jit(final_x), jax.jit(jax.grad(final_x))
    v = jax.numpy.asarray(v0)
    t = time.perf_counter()
    f(v).block_until_ready()
    g(v).block_until_ready()
    compile_s = time.perf_counter() - t
    t = time.perf_counter()
    loss = float(f(v).block_until_ready())
    t_fwd = time.perf_counter() - t
    t = time.perf_counter()
    grad = np.asarray(g(v).block_until_ready())
    return loss, grad, t_fwd, time.perf_counter() - t, compile_s


def bench_mjx_toss(quick):
    """rows: method, setting, loss error, gradient error, forward (s), gradient (s), note"""
    try:
        import jax
        from mujoco import mjx  # noqa: F401
    except ImportError as e:
        print(f"skipping mjx-toss: {e} (pip install mujoco-mjx)")
        return []
    jax.config.update("jax_enable_x64", True)
    horizon = 0.5 if quick else 1.0
    ref_loss, ref_grad, _, _ = toss_contactkit(0.01, "tsit5", 1e-12, horizon, TOSS_V0)
    eps, fd = 1e-5, np.zeros(6)
    for k in range(6):
        e = np.zeros(6)
        e[k] = eps
        lp = toss_contactkit(0.01, "tsit5", 1e-12, horizon, TOSS_V0 + e, grad=False)[0]
        lm = toss_contactkit(0.01, "tsit5", 1e-12, horizon, TOSS_V0 - e, grad=False)[0]
        fd[k] = (lp - lm) / (2 * eps)
    print(f"reference: tsit5 at 1e-12, loss {ref_loss:.6f} m; its analytic gradient agrees "
          f"with central differences to {np.linalg.norm(ref_grad - fd) / np.linalg.norm(fd):.1e}")

    def err(loss, grad):
        return abs(loss - ref_loss), np.linalg.norm(grad - fd) / np.linalg.norm(fd)

    rows = []
    for h in ([2e-3] if quick else [2e-3, 1e-3, 5e-4]):
        loss, grad, t_fwd, t_grad, t_compile = toss_mjx(h, horizon, TOSS_V0)
        rows.append(("MJX euler", f"h {h:g}", *err(loss, grad), t_fwd, t_grad,
                     f"1 solver iteration; jit {t_compile:.1f} s"))
        loss, grad, t_fwd, t_grad = toss_contactkit(h, "model", 0, horizon, TOSS_V0)
        rows.append(("contactkit euler", f"h {h:g}", *err(loss, grad), t_fwd, t_grad, ""))
    for tol in ([1e-6] if quick else [1e-4, 1e-6, 1e-8]):
        loss, grad, t_fwd, t_grad = toss_contactkit(0.01, "tsit5", tol, horizon, TOSS_V0)
        rows.append(("contactkit tsit5", f"tol {tol:g}", *err(loss, grad), t_fwd, t_grad, ""))
    return rows


def print_sysid(rows) -> None:
    print(f"contactkit {contactkit.__version__}, MuJoCo {mujoco.__version__}, {os.cpu_count()} "
          "cores; errors relative to the true values (%)")
    print("| problem | method | parameter errors (%) | max error (%) | time (s) | rollouts |")
    print("| --- | --- | --- | --- | --- | --- |")
    for problem, method, err, worst, seconds, rollouts in rows:
        if err is None:
            print(f"| {problem} | {method} | - | - | - | {rollouts} |")
            continue
        errs = " ".join(f"{e:.2f}" for e in err)
        print(f"| {problem} | {method} | {errs} | {worst:.2f} | {seconds:.2f} | {rollouts} |")


def timed(fn, repeat, cpu=time.process_time):
    """wall time (s) and CPU time (s, cpu() before and after) of the fastest of repeat runs"""
    best = (float("inf"), 0.0)
    for _ in range(repeat):
        c, t = cpu(), time.perf_counter()
        fn()
        t = time.perf_counter() - t
        if t < best[0]:
            best = (t, cpu() - c)
    return best


def bench_ray(models, nbatch, nstep, repeat, address=None):
    """rows: case, wall (s), CPU (s), note; and the per-rollout and per-chunk costs"""
    if "humanoid" not in models:
        print("skipping ray: no humanoid model (--mujoco-models)")
        return [], {}
    try:
        import ray
    except ImportError:
        print("skipping ray: Ray is not installed (pip install ray)")
        return [], {}
    import contactkit.distributed as ckd
    m = models["humanoid"]
    s0, u = batch(m, nbatch, nstep)
    datas = [mujoco.MjData(m), mujoco.MjData(m)]
    ref = contactkit.rollout(m, datas[:1], s0, u, solver="mujoco")[0]
    rows, costs = [], {"bytes": ref[0].nbytes}
    tiny = 64
    for n in (1, 2):
        t, c = timed(lambda: contactkit.rollout(m, datas[:n], s0, u, solver="mujoco"), repeat)
        costs[f"local{n}"] = (t, c)
        rows.append((f"contactkit.rollout, {n} thread{'s' * (n > 1)}", t, c, ""))
    costs["chunk_local"] = timed(lambda: contactkit.rollout(m, datas[:1], s0[:tiny],
                                                            u[:tiny, :1], solver="mujoco"),
                                 repeat)
    if not ray.is_initialized():
        os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
        if address is None:  # one node, on the loopback address only (read at import)
            ray._private.ray_constants.ENABLE_RAY_CLUSTER = False
            # no token file in ~/.ray: nothing outside this machine can reach the cluster
            os.environ.setdefault("RAY_AUTH_MODE", "disabled")
        ray.init(address=address, include_dashboard=False if address is None else None,
                 logging_level="ERROR", log_to_driver=False)
    for n in (1, 2):
        with ckd.Executor(m, num_workers=n) as ex:
            ex.rollout(s0[:2 * n], u[:2 * n], solver="mujoco")  # workers built

            def cpu():  # the driver's and every worker's CPU time
                return time.process_time() + sum(ex.cpu_seconds())

            out = {}

            def run():
                out["state"] = ex.rollout(s0, u, solver="mujoco")[0]

            t, c = timed(run, repeat, cpu)
            costs[f"ray{n}"] = (t, c)
            same = "same bits" if np.array_equal(out["state"], ref) else "DIFFERENT BITS"
            chunks = ex.last_stats.chunks
            rows.append((f"Executor, {n} worker{'s' * (n > 1)}", t, c,
                         f"{chunks} chunks of {-(-nbatch // chunks)}; {same}"))
            costs[f"chunk{n}"] = timed(lambda: ex.rollout(s0[:tiny], u[:tiny, :1],
                                                          solver="mujoco", chunk_size=1),
                                       repeat, cpu)
    return rows, costs


def print_ray(rows, costs, nbatch, nstep):
    print(f"{nbatch} humanoid rollouts x {nstep} steps (solver mujoco), contactkit "
          f"{contactkit.__version__}, MuJoCo {mujoco.__version__}, {os.cpu_count()} cores; "
          f"CPU: the driver's and the workers' processes")
    print("| case | wall (s) | rollouts/s | CPU (s) | CPU against 1 local thread | note |")
    print("| --- | --- | --- | --- | --- | --- |")
    t1, c1 = costs["local1"]
    for case, t, c, note in rows:
        print(f"| {case} | {t:.3f} | {nbatch / t:.0f} | {c:.3f} | {c / c1:.3f} | {note} |")
    per_step = c1 / (nbatch * nstep)
    over = (costs["ray1"][1] - c1) / nbatch
    print(f"one humanoid step: {per_step * 1e6:.1f} us of CPU; a rollout's states: "
          f"{costs['bytes'] / 1e3:.0f} kB")
    print(f"Ray's CPU per rollout (1 worker against 1 thread): {over * 1e3:.3f} ms "
          f"({over / (per_step * nstep):.1%} of a {nstep}-step rollout)")
    for n in (1, 2):
        wall = (costs[f"chunk{n}"][0] - costs["chunk_local"][0]) / 64
        cpu = (costs[f"chunk{n}"][1] - costs["chunk_local"][1]) / 64
        print(f"Ray's cost per chunk ({n} worker{'s' * (n > 1)}; 64 chunks of one 1-step "
              f"rollout): {wall * 1e3:.3f} ms wall, {cpu * 1e3:.3f} ms CPU")


def main(argv=None) -> int:
    here = pathlib.Path(__file__).resolve()
    parser = argparse.ArgumentParser(prog="python -m contactkit.bench", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("what", nargs="*", default=["rollout", "threads", "step", "gym"],
                        help="rollout, threads, step, gym (the default), mjx-toss, sysid, ray")
    parser.add_argument("--address", default=None,
                        help="ray: the Ray cluster (default: start one on this machine)")
    parser.add_argument("--mujoco-models",
                        default=os.environ.get("CK_MUJOCO_MODELS", "/usr/share/mujoco/model"))
    parser.add_argument("--menagerie", default=None, help="folder of Menagerie models")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="short runs (smoke test only)")
    parser.add_argument("--plot", default=None,
                        help="sysid: write PREFIX_cube.{dat,gp,png} and PREFIX_panda.* plots")
    a = parser.parse_args(argv)
    candidates = [pathlib.Path(a.menagerie)] if a.menagerie else [
        p / "shared" / "models" for p in list(here.parents)[:6]] + [
        pathlib.Path.cwd().parent / "shared" / "models"]
    menagerie = next((p for p in candidates if p.is_dir()), None)
    paths = {"humanoid": pathlib.Path(a.mujoco_models) / "humanoid" / "humanoid.xml"}
    if menagerie is not None:
        paths["panda"] = menagerie / "franka_emika_panda" / "scene.xml"
    models = {}
    for name, p in paths.items():
        if p.is_file():
            models[name] = mujoco.MjModel.from_xml_path(str(p))
        else:
            print(f"skipping {name}: {p} is absent")
    if "panda" not in paths:
        print("skipping panda: no Menagerie folder found (--menagerie)")
    scale = 10 if a.quick else 1
    rows = []
    if "rollout" in a.what:
        rows += bench_rollout(models, 32 // (4 if a.quick else 1), 500 // scale, a.repeat)
    if "threads" in a.what:
        rows += bench_threads(models, 200 // scale, a.repeat)
    if "step" in a.what:
        rows += bench_step(models, 2000 // scale, a.repeat)
    if "gym" in a.what:
        rows += bench_gym(1000 // scale, max(1, a.repeat // 2))
    if "ray" in a.what:
        nbatch, nstep = (64, 50) if a.quick else (1024, 500)
        ray_rows, times = bench_ray(models, nbatch, nstep, a.repeat, a.address)
        if ray_rows:
            print_ray(ray_rows, times, nbatch, nstep)
    if "mjx-toss" in a.what:
        toss = bench_mjx_toss(a.quick)
        if toss:
            print("| method | step / tolerance | loss error (m) | gradient error | forward (s) | "
                  "gradient (s) | note |")
            print("| --- | --- | --- | --- | --- | --- | --- |")
            for method, setting, lerr, gerr, t_fwd, t_grad, note in toss:
                print(f"| {method} | {setting} | {lerr:.2e} | {gerr:.2e} | {t_fwd:.4f} | "
                      f"{t_grad:.4f} | {note} |")
    if "sysid" in a.what:
        from ._bench_sysid import bench_sysid
        print_sysid(bench_sysid(str(menagerie) if menagerie else None, a.quick, a.plot))
    if not rows:
        return 0
    print(f"contactkit {contactkit.__version__}, MuJoCo {mujoco.__version__}, "
          f"{os.cpu_count()} cores; best of {a.repeat}")
    print("| case | size | reference (s) | contactkit (s) | ratio | target / note |")
    print("| --- | --- | --- | --- | --- | --- |")
    for case, size, ref, ours, ratio, note in rows:
        print(f"| {case} | {size} | {ref:.4f} | {ours:.4f} | {ratio:.2f} | {note} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
