"""Compare contactkit's solvers on a Menagerie robot: penetration and energy over time, into a PNG.

usage: python python/examples/compare_solvers.py [MODEL.xml] [--seconds S] [--out compare.png]

MODEL defaults to the Unitree A1 (../shared/models/unitree_a1/scene_mj222.xml beside the
repository), dropped from 0.2 m above its keyframe with zero control.
"""

import argparse
import pathlib

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import mujoco  # noqa: E402
import numpy as np  # noqa: E402

import contactkit  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[2]


def run(model, solver, seconds, drop):
    data = mujoco.MjData(model)
    if model.nkey:
        mujoco.mj_resetDataKeyframe(model, data, 0)
    data.qpos[2] += drop if model.jnt_type[0] == mujoco.mjtJoint.mjJNT_FREE else 0.0
    h = contactkit.Handle(model, solver=solver, derivatives=False)
    n = int(seconds / model.opt.timestep)
    t, pen, energy = np.empty(n), np.empty(n), np.empty(n)
    for i in range(n):
        h.step(model, data)
        mujoco.mj_energyPos(model, data)
        mujoco.mj_energyVel(model, data)
        t[i] = data.time
        pen[i] = 1000 * h.stats.max_penetration
        energy[i] = data.energy[0] + data.energy[1]
    return t, pen, energy


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model", nargs="?",
                        default=str(ROOT.parent / "shared/models/unitree_a1/scene_mj222.xml"))
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--drop", type=float, default=0.2, help="height added to a free base (m)")
    parser.add_argument("--out", default="compare.png")
    a = parser.parse_args()
    model = mujoco.MjModel.from_xml_path(a.model)
    model.opt.enableflags |= mujoco.mjtEnableBit.mjENBL_ENERGY
    fig, (ax1, ax2) = plt.subplots(2, 1, sharex=True, figsize=(8, 6))
    for solver in ("mujoco", "ipm", "comfree", "lcp"):
        t, pen, energy = run(model, solver, a.seconds, a.drop)
        ax1.plot(t, pen, label=solver)
        ax2.plot(t, energy, label=solver)
        print(f"{solver:8s} max penetration {pen.max():7.3f} mm, final energy {energy[-1]:9.3f} J")
    ax1.set_ylabel("deepest contact (mm)")
    ax2.set_ylabel("kinetic + potential energy (J)")
    ax2.set_xlabel("time (s)")
    ax1.legend()
    ax1.set_title(pathlib.Path(a.model).name)
    fig.tight_layout()
    fig.savefig(a.out, dpi=120)
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
