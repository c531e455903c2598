"""contactkit.sysid: parameters recovered from simulated trajectories, analytic and differenced
Jacobians, bad input."""

import os

import mujoco
import numpy as np
import pytest

from contactkit import sysid

from support import PENDULUM_XML as XML
from support import record_pendulum as record

PARAMS = ["body:link:mass", "joint:hinge:damping"]
TRUE = np.array([1.3, 0.3])


@pytest.fixture(scope="module")
def data():
    model = mujoco.MjModel.from_xml_string(XML)
    return model, [record(model, 1.0), record(model, 3.0)]


@pytest.mark.parametrize("jacobian", ["analytic", "fd"])
def test_recovers_mass_and_friction(data, jacobian):
    model, trajectories = data
    before = model.body_mass.copy(), model.dof_damping.copy()
    res = sysid.identify(model, PARAMS, trajectories, x0=np.array([0.8, 0.9]),
                         bounds=(np.array([0.1, 0.0]), np.array([5.0, 2.0])),
                         jacobian=jacobian, solver="mujoco")
    np.testing.assert_allclose(res.x, TRUE, rtol=1e-3)
    assert res.cost < 1e-8
    # the model keeps its own values
    np.testing.assert_array_equal(model.body_mass, before[0])
    np.testing.assert_array_equal(model.dof_damping, before[1])


def test_analytic_jacobian_needs_fewer_rollouts(data):
    model, trajectories = data
    kw = dict(x0=np.array([0.8, 0.9]), bounds=(np.array([0.1, 0.0]), np.array([5.0, 2.0])),
              solver="mujoco")
    an = sysid.identify(model, PARAMS, trajectories, jacobian="analytic", **kw)
    fd = sysid.identify(model, PARAMS, trajectories, jacobian="fd", **kw)
    assert an.rollouts < fd.rollouts


def test_noisy_optimum_is_reached_in_fewer_evaluations():
    # the benchmark's tossed cube: at its noisy optimum every trial step is rejected until mu_max,
    # and identify's tenfold regularizer gets there in far fewer residual rollouts than
    # mujoco.minimize's own factor 10^0.1, at the same answer. The step and gradient tolerances
    # are set below the optimum's rounding so that the rejections end the solve on every machine
    # (with the defaults, some CPUs' rounding meets xtol or gtol first and both runs are equal)
    from contactkit import _bench_sysid as bench

    pr = bench.cube_problem(6, 160)
    kw = dict(x0=pr.start, bounds=(pr.lower, pr.upper), observe="sensors", horizon=10,
              jacobian="fd", solver="mujoco")
    strict = {"xtol": 1e-12, "gtol": 1e-30}
    fast = sysid.identify(pr.model, pr.names, pr.trajectories, optimizer_options=strict, **kw)
    slow = sysid.identify(pr.model, pr.names, pr.trajectories,
                          optimizer_options=dict(strict, mu_factor=10 ** 0.1), **kw)
    np.testing.assert_allclose(fast.x, pr.true, rtol=0.01)
    np.testing.assert_allclose(fast.x, slow.x, rtol=1e-4)
    assert fast.cost <= slow.cost * (1 + 1e-5)
    assert 2 * fast.rollouts < slow.rollouts
    with pytest.raises(ValueError, match="optimizer_options cannot set.*bounds"):
        sysid.identify(pr.model, pr.names, pr.trajectories, optimizer_options={"bounds": None},
                       **kw)


def test_bad_input_is_named(data):
    model, trajectories = data
    with pytest.raises(ValueError, match="colour|supported|syntax"):
        sysid.identify(model, ["body:link:colour"], trajectories)
    with pytest.raises(ValueError, match="jacobian"):
        sysid.identify(model, PARAMS, trajectories, jacobian="exact")
    bad = sysid.Trajectory(trajectories[0].qpos0, trajectories[0].qvel0,
                           trajectories[0].ctrl[:, :0], trajectories[0].qpos, trajectories[0].qvel)
    with pytest.raises(ValueError, match="ctrl must have shape"):
        sysid.identify(model, PARAMS, [bad])


@pytest.mark.parametrize("observe,horizon", [("sensors", None), ("state", 20), ("sensors", 15)])
def test_sensors_and_windows_recover_the_parameters(data, observe, horizon):
    """sensor residuals (C S + DsDp rows) and windows restarted from the recording"""
    model, trajectories = data
    res = sysid.identify(model, PARAMS, trajectories, x0=np.array([0.8, 0.9]),
                         bounds=(np.array([0.1, 0.0]), np.array([5.0, 2.0])),
                         observe=observe, horizon=horizon, solver="mujoco")
    np.testing.assert_allclose(res.x, TRUE, rtol=1e-3)


def test_windows_restart_from_the_recorded_state(data):
    _, trajectories = data
    tr = trajectories[0]
    wins = sysid.windows(tr, 30)
    assert [len(w.ctrl) for w in wins] == [30, 30, 20]
    np.testing.assert_array_equal(wins[1].qpos0, tr.qpos[29])
    np.testing.assert_array_equal(wins[2].qvel0, tr.qvel[59])
    np.testing.assert_array_equal(wins[2].sensordata, tr.sensordata[60:])


def test_a_list_of_names_is_one_unknown():
    """two hinges whose damping is one value: the tied unknown is found, the model kept"""
    xml = XML.replace('<actuator>', """<worldbody><body name="two">
      <joint name="h2" type="hinge" axis="0 1 0" damping="0.3"/>
      <geom type="capsule" fromto="0 0.2 0 0.3 0.2 0" size="0.03" mass="0.9"/></body>
      </worldbody><actuator><motor joint="h2" gear="1"/>""")
    model = mujoco.MjModel.from_xml_string(xml)
    trajectories = [record(model, 1.0)]
    for tr in trajectories:
        tr.ctrl = np.hstack([tr.ctrl, 0.5 * tr.ctrl])
    d = mujoco.MjData(model)
    recorded = []
    for tr in trajectories:  # rerecord with both motors driven
        mujoco.mj_resetData(model, d)
        qs, vs = [], []
        for u in tr.ctrl:
            d.ctrl[:] = u
            mujoco.mj_step(model, d)
            qs.append(d.qpos.copy())
            vs.append(d.qvel.copy())
        recorded.append(sysid.Trajectory(tr.qpos0, tr.qvel0, tr.ctrl, np.array(qs), np.array(vs)))
    res = sysid.identify(model, [["joint:hinge:damping", "joint:h2:damping"]], recorded,
                         x0=np.array([0.9]), bounds=(np.array([0.0]), np.array([2.0])),
                         solver="mujoco")
    np.testing.assert_allclose(res.x, [0.3], rtol=1e-4)
    np.testing.assert_array_equal(model.dof_damping, [0.3, 0.3])
    with pytest.raises(ValueError, match="x0 must have shape"):
        sysid.identify(model, [["joint:hinge:damping", "joint:h2:damping"]], recorded,
                       x0=np.array([0.9, 0.9]))


def test_mass_is_set_as_a_compiled_model_holds_it():
    """set_params refreshes the compiler's constants: a free body then falls at g whatever its
    mass (with the field alone MuJoCo 3.x falls faster: its simple bodies read dof_M0)"""
    model = mujoco.MjModel.from_xml_string(
        '<mujoco><worldbody><body name="b"><freejoint/><geom size="0.1" mass="1"/></body>'
        '</worldbody></mujoco>')
    param = sysid.parse_params(model, ["body:b:mass"])
    sysid.set_params(model, [param], [3.0])
    d = mujoco.MjData(model)
    mujoco.mj_step(model, d)
    np.testing.assert_allclose(d.qvel[2], -9.81 * model.opt.timestep, rtol=1e-12)


def test_bad_observe_and_horizon_are_named(data):
    model, trajectories = data
    with pytest.raises(ValueError, match="observe"):
        sysid.identify(model, PARAMS, trajectories, observe="camera")
    with pytest.raises(ValueError, match="horizon"):
        sysid.identify(model, PARAMS, trajectories, horizon=0)
    bare = sysid.Trajectory(*[getattr(trajectories[0], f) for f in
                              ("qpos0", "qvel0", "ctrl", "qpos", "qvel")])
    with pytest.raises(ValueError, match="sensordata"):
        sysid.identify(model, PARAMS, [bare], observe="sensors")


def test_tossed_cube_matches_mujoco_sysid():
    """the benchmark's tossed cube (friction, half-size, mass from noisy pose sensors, windows):
    contactkit's analytic Jacobians and mujoco.sysid (differences) land on the same parameters,
    within 5% of the true ones"""
    from contactkit import _bench_sysid as bench

    pr = bench.cube_problem(3, 80, seed=3)
    x, _, _ = bench.run_contactkit(pr, 10, "mujoco", "analytic", 30)
    np.testing.assert_allclose(x, pr.true, rtol=0.05)
    ref, _, _ = bench.run_mujoco_sysid(pr, 10, 1, 30)
    np.testing.assert_allclose(x, ref, rtol=1e-2)  # starts 20-60% away; noise flattens the optimum


@pytest.mark.parametrize("observe", ["state", "sensors"])
def test_batched_residual_is_the_step_by_step_rollout(data, observe):
    """identify's residual (batched rollouts, grouped by length) gives the numbers of the
    step-by-step rollout its Jacobian uses, for windows of unequal length, on a hinge and on a
    free joint (quaternion differences)"""
    from contactkit import _bench_sysid as bench
    from contactkit._handle import Handle

    model, trajectories = data
    cube = bench.cube_problem(2, 40, seed=1)
    cases = [(model, PARAMS, trajectories, np.array([[0.8, 1.3], [0.9, 0.3]])),
             (cube.model, cube.names, cube.trajectories, np.stack([cube.start, cube.true], 1))]
    for m, names, trs, X in cases:
        wins = [w for tr in trs for w in sysid.windows(tr, 30)]
        assert len({len(w.ctrl) for w in wins}) == 2
        nobs = m.nsensordata if observe == "sensors" else 2 * m.nv
        weights = np.linspace(1.0, 2.0, nobs)
        problem = sysid._Problem(m, Handle(m, solver="mujoco"), sysid._groups(m, names), wins,
                                 weights, observe == "sensors", {"solver": "mujoco"})
        batched = problem.residual(X)
        for k in range(X.shape[1]):
            one = np.concatenate([problem.rollout(X[:, k], w, False)[0] for w in wins])
            np.testing.assert_allclose(batched[:, k], one, rtol=0, atol=1e-12)
        assert np.abs(batched[:, 0] - batched[:, 1]).max() > 1e-3  # the parameters show


# Menagerie's folder from CK_MENAGERIE, else ../shared/models beside the repository (as the C++
# tests' default); the test skips only where neither holds the Panda
MENAGERIE = os.environ.get("CK_MENAGERIE") or os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "shared", "models")
PANDA = os.path.join(MENAGERIE, "franka_emika_panda", "scene.xml")


@pytest.mark.skipif(not os.path.isfile(PANDA), reason="Menagerie's Franka Panda is absent")
def test_panda_benchmark_recovers_damping_armature_and_mass():
    """the benchmark's arm: its servo targets keep every torque within 80% of its limit at the
    true parameters (no saturation), and contactkit's analytic Jacobians recover the damping
    and armature of joints 1-4 and link 3's mass from noisy joint positions, velocities and
    torques within 5%, from a start 30-60% off"""
    from contactkit import _bench_sysid as bench

    pr = bench.panda_problem(PANDA, 1, 1000, seed=2)
    m = pr.model
    d = mujoco.MjData(m)
    tr = pr.trajectories[0]
    d.qpos[:], d.qvel[:] = tr.qpos0, tr.qvel0
    peak = 0.0
    for u in tr.ctrl:
        d.ctrl[:] = u
        mujoco.mj_step(m, d)
        peak = max(peak, float(np.max(np.abs(d.actuator_force[:7]) / m.actuator_forcerange[:7, 1])))
    assert peak < 0.8
    assert np.abs(tr.ctrl[:, :4] - tr.ctrl[0, :4]).max() > 0.05  # the targets do move
    assert np.all(np.abs(pr.start - pr.true) > 0.25 * pr.true)
    x, _, _ = bench.run_contactkit(pr, 1000, "mujoco", "analytic", 30)
    np.testing.assert_allclose(x, pr.true, rtol=0.05)
