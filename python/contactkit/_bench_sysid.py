"""System identification side by side with mujoco.sysid (python -m contactkit.bench sysid).

Two problems on data simulated by MuJoCo with hidden "true" parameters plus sensor noise, each
fitted from the same starting guess by
  - mujoco.sysid (Gauss-Newton / Levenberg-Marquardt of mujoco.minimize with finite differences:
    one rollout per parameter, the spec recompiled per parameter vector, batched through
    mujoco.rollout), with one thread and with every core, and (like for like) with the
    regularizer factor that identify uses;
  - contactkit.sysid.identify with contactkit's parameter Jacobians (forward sensitivities, one
    rollout per Jacobian) and, for reference, with mujoco.minimize's differences of the same
    residual, for each solver.
The residual is the same for all: the sensors (as mj_step leaves them) of windows of K steps, each
restarted from the recorded (noisy) state. Problems:
  cube   a cube tossed onto a table from varied initial states (Dojo Sec. VII-C, DiffMJX Sec.
         5.1): sliding friction, half-size (one unknown for the three) and mass, from the cube's
         position and orientation (framepos, framequat); the table's contact is stiffness-based
         (solref -k -b), so that the mass shows in the contact
  panda  the Franka Panda (Menagerie) driven by a recorded control sequence: damping and
         armature of joints 1-4 and the mass of link 3, from joint positions, velocities and
         actuator forces (sensors added to the spec in memory; the Menagerie file is untouched).
         The servo targets of joints 1-4 are multi-sines whose amplitude is scaled until the
         torques stay within 80% of their limits at the true parameters: a saturated servo runs
         open loop, and its clipping made the residual's landscape rough (the earlier design,
         70% of the torques saturated, had local minima at 30-200% error for every method)
"""

from __future__ import annotations

import time
from typing import Optional

import mujoco
import numpy as np

from . import sysid

FULL = mujoco.mjtState.mjSTATE_FULLPHYSICS

CUBE_XML = """
<mujoco model="tossed cube">
  <option timestep="0.005"/>
  <worldbody>
    <geom name="table" type="plane" size="0 0 1" friction="0.05 0.005 0.0001"/>
    <body name="cube" pos="0 0 0.3">
      <freejoint/>
      <inertial pos="0 0 0" mass="0.5" diaginertia="0.0013 0.0013 0.0013"/>
      <geom name="cube" type="box" size="0.05 0.05 0.05" friction="0.4 0.005 0.0001"
            solref="-20000 -60"/>
    </body>
  </worldbody>
  <sensor>
    <framepos name="pos" objtype="body" objname="cube"/>
    <framequat name="quat" objtype="body" objname="cube"/>
  </sensor>
</mujoco>"""


class Problem:
    """a spec, the unknowns (names for contactkit, modifiers for mujoco.sysid), true values,
    the start and bounds, and recorded trajectories"""

    def __init__(self, name, spec, names, modifiers, true, start, lower, upper):
        self.name, self.spec = name, spec
        self.names, self.modifiers = names, modifiers
        self.true, self.start = np.array(true), np.array(start)
        self.lower, self.upper = np.array(lower), np.array(upper)
        self.model = spec.compile()
        self.trajectories: list = []
        self.weights: Optional[np.ndarray] = None  # residual weights per sensor (None: ones)


def record(model, qpos0, qvel0, ctrl, noise, rng, sensor_noise=None) -> sysid.Trajectory:
    """mj_step from (qpos0, qvel0) with ctrl (T, nu); the states after each step and the sensors
    of each step, with Gaussian noise (noise: position, velocity standard deviations) on the
    recorded states and sensors (sensor_noise: one standard deviation per sensor value; default
    the position one)"""
    d = mujoco.MjData(model)
    d.qpos[:], d.qvel[:] = qpos0, qvel0
    qs, vs, ss = [], [], []
    for u in ctrl:
        d.ctrl[:] = u
        mujoco.mj_step(model, d)
        qs.append(d.qpos.copy())
        vs.append(d.qvel.copy())
        ss.append(d.sensordata.copy())
    qs, vs, ss = np.array(qs), np.array(vs), np.array(ss)
    sp, sv = noise
    # positions: noise in the tangent space (quaternions stay unit)
    for q in qs:
        mujoco.mj_integratePos(model, q, rng.normal(scale=sp, size=model.nv), 1.0)
    vs = vs + rng.normal(scale=sv, size=vs.shape)
    ss = ss + rng.normal(size=ss.shape) * (sp if sensor_noise is None else sensor_noise)
    return sysid.Trajectory(np.array(qpos0), np.array(qvel0), np.array(ctrl), qs, vs, ss)


def cube_problem(ntoss: int, steps: int, seed: int = 0) -> Problem:
    spec = mujoco.MjSpec.from_string(CUBE_XML)

    def friction(s, p):
        s.geom("cube").friction = [p.value[0], 0.005, 0.0001]

    def size(s, p):
        s.geom("cube").size = [p.value[0]] * 3

    def mass(s, p):
        s.body("cube").mass = p.value[0]

    pr = Problem("cube", spec,
                 ["geom:cube:friction:0",
                  ["geom:cube:size:0", "geom:cube:size:1", "geom:cube:size:2"],
                  "body:cube:mass"],
                 [("friction", friction), ("half-size", size), ("mass", mass)],
                 [0.4, 0.05, 0.5], [0.25, 0.06, 0.8], [0.05, 0.02, 0.1], [1.5, 0.1, 2.0])
    rng = np.random.default_rng(seed)
    m = pr.model
    for _ in range(ntoss):
        q = rng.normal(size=4)
        qpos0 = np.r_[0, 0, 0.15 + 0.1 * rng.random(), q / np.linalg.norm(q)]
        qvel0 = np.r_[1.5 + rng.random(), 0.5 * rng.normal(), 0, 3 * rng.normal(size=3)]
        pr.trajectories.append(record(m, qpos0, qvel0, np.zeros((steps, 0)), (1e-4, 1e-3), rng))
    return pr


# the arm's sensors and their noise (standard deviations): joint encoders (rad), joint
# velocities (rad/s), joint torques (Nm), as a torque-sensing arm such as the Panda reports them
# (named: mujoco.sysid's TimeSeries.from_names maps unnamed sensors onto one column)
PANDA_SENSORS = (("q", mujoco.mjtSensor.mjSENS_JOINTPOS, mujoco.mjtObj.mjOBJ_JOINT, "joint", 1e-4),
                 ("v", mujoco.mjtSensor.mjSENS_JOINTVEL, mujoco.mjtObj.mjOBJ_JOINT, "joint", 1e-3),
                 ("tau", mujoco.mjtSensor.mjSENS_ACTUATORFRC, mujoco.mjtObj.mjOBJ_ACTUATOR,
                  "actuator", 0.1))


def panda_targets(m, steps: int, rng, home: np.ndarray, d) -> np.ndarray:
    """servo targets (steps, nu): home, plus on joints 1-4 five sines each (0.5-3 Hz, random
    phases) faded in over 0.3 s, scaled down until every arm torque of the rollout at m's
    parameters from d's state stays within 80% of its limit (no saturation: the closed loop stays
    smooth in the parameters)"""
    t = np.arange(steps) * m.opt.timestep
    lo, hi = m.jnt_range[:4, 0] + 0.15, m.jnt_range[:4, 1] - 0.15
    half = np.minimum(home[:4] - lo, hi - home[:4])
    wave = np.zeros((steps, 4))
    for _ in range(5):
        freq = rng.uniform(0.5, 3.0, 4)
        wave += 0.4 * half / 5 * np.sin(2 * np.pi * freq * t[:, None] + rng.uniform(0, 6.3, 4))
    fade = np.clip(t / 0.3, 0, 1)
    wave *= (fade * fade * (3 - 2 * fade))[:, None]
    ctrl = np.repeat(home[None], steps, axis=0)
    limit = m.actuator_forcerange[:7, 1]
    q0, v0 = d.qpos.copy(), d.qvel.copy()
    for _ in range(20):
        ctrl[:, :4] = np.clip(home[:4] + wave, lo, hi)
        d.qpos[:], d.qvel[:] = q0, v0
        peak = 0.0
        for u in ctrl:
            d.ctrl[:] = u
            mujoco.mj_step(m, d)
            peak = max(peak, float(np.max(np.abs(d.actuator_force[:7]) / limit)))
        if peak < 0.8:
            break
        wave *= max(0.5, min(0.95, 0.75 / peak))
    d.qpos[:], d.qvel[:] = q0, v0
    return ctrl


def panda_problem(path: str, ntraj: int, steps: int, seed: int = 0) -> Problem:
    spec = mujoco.MjSpec.from_file(path)
    sigma = []
    for label, kind, objtype, prefix, noise in PANDA_SENSORS:
        for j in range(1, 8):
            sensor = spec.add_sensor()
            sensor.name, sensor.type, sensor.objtype = f"{label}{j}", kind, objtype
            sensor.objname = f"{prefix}{j}"
            sigma.append(noise)
    names, modifiers, true, start, lower, upper = [], [], [], [], [], []
    for j in range(1, 5):
        names.append(f"joint:joint{j}:damping")

        def damping(s, p, j=j):
            joint = s.joint(f"joint{j}")
            value = np.array(joint.damping)  # MuJoCo 3.17: (3,), the first is the linear one
            value.flat[0] = p.value[0]
            joint.damping = value

        modifiers.append((f"damping {j}", damping))
        true.append(1.0)
        start.append(1.6)
        lower.append(0.1)
        upper.append(5.0)
    for j in range(1, 5):
        names.append(f"joint:joint{j}:armature")

        def armature(s, p, j=j):
            s.joint(f"joint{j}").armature = p.value[0]

        modifiers.append((f"armature {j}", armature))
        true.append(0.1)
        start.append(0.15)
        lower.append(0.01)
        upper.append(1.0)
    names.append("body:link3:mass")

    def mass(s, p):
        s.body("link3").mass = p.value[0]

    modifiers.append(("link3 mass", mass))
    model = spec.compile()
    true.append(float(model.body("link3").mass[0]))
    start.append(1.3 * true[-1])
    lower.append(0.3 * true[-1])
    upper.append(3.0 * true[-1])
    pr = Problem("panda", spec, names, modifiers, true, start, lower, upper)
    m = pr.model
    rng = np.random.default_rng(seed)
    key = m.key("home").id if m.nkey else -1
    d = mujoco.MjData(m)
    for _ in range(ntraj):
        mujoco.mj_resetData(m, d)
        if key >= 0:
            mujoco.mj_resetDataKeyframe(m, d, key)
        ctrl = panda_targets(m, steps, rng, d.ctrl.copy(), d)
        pr.trajectories.append(record(m, d.qpos.copy(), d.qvel.copy(), ctrl, (1e-4, 1e-3), rng,
                                      np.array(sigma)))
    pr.weights = 1 / np.array(sigma)
    return pr


def run_mujoco_sysid(pr: Problem, horizon: int, threads: int, max_iter: int, **options):
    """mujoco.sysid on the problem's windows (options: mujoco.minimize.least_squares's, which
    mujoco.sysid forwards); returns (x, seconds, window rollouts)"""
    from mujoco import sysid as mjs  # optional extras (tools/setup.sh installs them)

    m = pr.model
    h = m.opt.timestep
    inits, controls, sensors = [], [], []
    d = mujoco.MjData(m)
    for tr in pr.trajectories:
        for w in sysid.windows(tr, horizon):
            mujoco.mj_resetData(m, d)
            d.qpos[:], d.qvel[:] = w.qpos0, w.qvel0
            s0 = np.empty(mujoco.mj_stateSize(m, FULL))
            mujoco.mj_getState(m, d, s0, FULL)
            k = len(w.ctrl)
            inits.append(s0)
            controls.append(mjs.TimeSeries(np.arange(k + 1) * h,  # each window's clock from 0
                                           np.vstack([w.ctrl, w.ctrl[-1:]])))
            sensors.append(mjs.TimeSeries.from_names(np.arange(1, k + 1) * h,
                                                     w.sensordata, m))
    ms = mjs.ModelSequences(pr.name, pr.spec, [f"w{i}" for i in range(len(inits))], inits,
                            controls, sensors)
    params = mjs.ParameterDict()
    for (label, fn), lo, hi, x0, true in zip(pr.modifiers, pr.lower, pr.upper, pr.start,
                                             pr.true):
        params.add(mjs.Parameter(label, nominal=true, min_value=lo, max_value=hi, modifier=fn))
        params[label].value[:] = x0
    weights = None
    if pr.weights is not None:
        # mujoco.sysid divides each window's sensor column by its norm / sqrt(2); scaled by the
        # mean of those, its weights are close to pr.weights (exact for equal norms)
        norms = np.mean([np.linalg.norm(s.data, axis=0) for s in sensors], axis=0)
        weights = pr.weights * norms / np.sqrt(2)
    residual = mjs.build_residual_fn(models_sequences=[ms], n_threads=threads,
                                     sensor_weights=weights)
    evals = [0]

    def counted(x, p, **kw):
        evals[0] += 1 if np.ndim(x) == 1 else np.shape(x)[1]
        return residual(x, p, **kw)

    t = time.perf_counter()
    opt, _ = mjs.optimize(initial_params=params, residual_fn=counted, optimizer="mujoco",
                          verbose=False, max_iters=max_iter, **options)
    return opt.as_vector(), time.perf_counter() - t, evals[0] * len(inits)


def run_contactkit(pr: Problem, horizon: int, solver: str, jacobian: str, max_iter: int):
    res = sysid.identify(pr.model, pr.names, pr.trajectories, x0=pr.start,
                         bounds=(pr.lower, pr.upper), weights=pr.weights, observe="sensors",
                         horizon=horizon,
                         jacobian=jacobian, max_iter=max_iter, solver=solver)
    return res.x, res.seconds, res.rollouts


def bench_sysid(menagerie: Optional[str], quick: bool, plot_prefix: Optional[str] = None,
                solvers=("mujoco", "ipm", "comfree", "lcp")):
    """rows: (problem, method, errors (%), max error (%), seconds, rollouts); with plot_prefix,
    the plots of contactkit mujoco's answer (plot_prefix + "_cube" / "_panda")"""
    import os

    problems = [cube_problem(2 if quick else 6, 40 if quick else 160)]
    if menagerie:
        path = os.path.join(menagerie, "franka_emika_panda", "scene.xml")
        if os.path.isfile(path):
            problems.append(panda_problem(path, 1 if quick else 2, 100 if quick else 1000))
        else:
            print(f"skipping panda: {path} is absent")
    horizon = {"cube": 10, "panda": 1000}  # the arm: whole recordings (not chaotic)
    max_iter = 5 if quick else 50
    rows = []
    for pr in problems:
        k = horizon[pr.name]
        runs = [("mujoco.sysid, 1 thread", lambda: run_mujoco_sysid(pr, k, 1, max_iter)),
                (f"mujoco.sysid, {os.cpu_count()} threads",
                 lambda: run_mujoco_sysid(pr, k, os.cpu_count() or 1, max_iter)),
                # like for like: mujoco.sysid given the regularizer factor identify uses
                ("mujoco.sysid, 1 thread, mu_factor 10",
                 lambda: run_mujoco_sysid(pr, k, 1, max_iter, **sysid.LM_OPTIONS))]
        for solver in solvers:
            runs.append((f"contactkit {solver}, analytic",
                         lambda s=solver: run_contactkit(pr, k, s, "analytic", max_iter)))
        runs.append(("contactkit mujoco, differences",
                     lambda: run_contactkit(pr, k, "mujoco", "fd", max_iter)))
        for method, fn in runs:
            try:
                x, seconds, rollouts = fn()
            except Exception as e:  # a failed method is a row that says so, not a crash
                rows.append((pr.name, method, None, None, None, f"failed: {e}"))
                continue
            err = 100 * np.abs(np.asarray(x) - pr.true) / np.abs(pr.true)
            if plot_prefix and method == "contactkit mujoco, analytic":
                channels = {"cube": ([0, 2], ["x", "z"]),
                            "panda": ([14, 15], ["tau1 (Nm)", "tau2 (Nm)"])}
                plot(pr, x, f"{plot_prefix}_{pr.name}", *channels[pr.name],
                     residual=pr.name == "panda")
            rows.append((pr.name, method, err, float(err.max()), seconds, rollouts))
            print(f"  {pr.name}: {method}: max error {err.max():.2f}% in {seconds:.1f} s",
                  flush=True)
    return rows


def simulate(pr: Problem, x, traj: sysid.Trajectory) -> np.ndarray:
    """the sensors of traj's whole rollout (no windows) with the unknowns at x, mj_step"""
    m = pr.spec.compile()
    groups = [sysid.parse_params(m, n if isinstance(n, list) else [n]) for n in pr.names]
    d = mujoco.MjData(m)
    sysid.set_params(m, groups, x, d)
    mujoco.mj_resetData(m, d)
    d.qpos[:], d.qvel[:] = traj.qpos0, traj.qvel0
    out = []
    for u in traj.ctrl:
        d.ctrl[:] = u
        mujoco.mj_step(m, d)
        out.append(d.sensordata.copy())
    return np.array(out)


def plot(pr: Problem, found, prefix: str, channels, labels, residual: bool = False) -> None:
    """prefix.dat / .gp / .png: the recorded sensors of the first trajectory against its whole
    rollout at the starting guess and at the identified parameters (gnuplot); residual: plot
    the rollouts minus the data instead (where both rollouts lie on the data at plot scale)"""
    import subprocess

    tr = pr.trajectories[0]
    h = pr.model.opt.timestep
    t = np.arange(1, len(tr.ctrl) + 1) * h
    start, ident = simulate(pr, pr.start, tr), simulate(pr, found, tr)
    with open(prefix + ".dat", "w") as f:
        f.write(f"# {pr.name}: time, then per channel: data, start guess, identified\n")
        for k in range(len(t)):
            cols = [f"{t[k]:.4f}"]
            for c in channels:
                cols += [f"{tr.sensordata[k, c]:.6g}", f"{start[k, c]:.6g}", f"{ident[k, c]:.6g}"]
            f.write(" ".join(cols) + "\n")
    lines = []
    for i, label in enumerate(labels):
        col = 2 + 3 * i
        if residual:
            lines += [f"'{prefix}.dat' using 1:(${col + 1}-${col}) with lines lw 1 dt 2 "
                      f"title '{label}: start - data'",
                      f"'{prefix}.dat' using 1:(${col + 2}-${col}) with lines lw 2 "
                      f"title '{label}: identified - data'"]
            continue
        lines += [f"'{prefix}.dat' using 1:{col} with points pt 7 ps 0.4 title '{label}: data'",
                  f"'{prefix}.dat' using 1:{col + 1} with lines lw 1 dt 2 title '{label}: start'",
                  f"'{prefix}.dat' using 1:{col + 2} with lines lw 2 title '{label}: identified'"]
    with open(prefix + ".gp", "w") as f:
        f.write("set terminal pngcairo size 900,550 noenhanced\n")
        f.write(f"set output '{prefix}.png'\n")
        what = "rollouts minus recorded sensors" if residual else "recorded sensors and rollouts"
        f.write(f"set title '{pr.name}: {what} (contactkit, identified)'\n")
        f.write("set xlabel 'time (s)'\nset grid\nset key outside right top\n")
        f.write("plot " + ", ".join(lines) + "\n")
    subprocess.run(["gnuplot", prefix + ".gp"], check=True)
