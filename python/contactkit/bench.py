"""python -m contactkit.bench: the Python package's speed, as ratios measured in one process.

  rollout    contactkit.rollout (solver "mujoco") against mujoco.rollout.rollout, one thread
  threads    contactkit.rollout speedup from 1 to 2 threads on a batch of 64
  step       Handle.step per call against mujoco.mj_step, one step per call
  gym        Gymnasium environments' steps per second, unpatched and patched with each solver

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


def main(argv=None) -> int:
    here = pathlib.Path(__file__).resolve()
    parser = argparse.ArgumentParser(prog="python -m contactkit.bench", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("what", nargs="*", default=["rollout", "threads", "step", "gym"])
    parser.add_argument("--mujoco-models",
                        default=os.environ.get("CK_MUJOCO_MODELS", "/usr/share/mujoco/model"))
    parser.add_argument("--menagerie", default=None, help="folder of Menagerie models")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="short runs (smoke test only)")
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
    print(f"contactkit {contactkit.__version__}, MuJoCo {mujoco.__version__}, "
          f"{os.cpu_count()} cores; best of {a.repeat}")
    print("| case | size | reference (s) | contactkit (s) | ratio | target / note |")
    print("| --- | --- | --- | --- | --- | --- |")
    for case, size, ref, ours, ratio, note in rows:
        print(f"| {case} | {size} | {ref:.4f} | {ours:.4f} | {ratio:.2f} | {note} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
