"""contactkit.sysid: parameters recovered from simulated trajectories, analytic and differenced
Jacobians, bad input."""

import mujoco
import numpy as np
import pytest

from contactkit import sysid

# a pendulum with a damped hinge and a motor; its link's mass and the hinge's damping are to be
# found (the contact-free case: the cost is smooth in both)
XML = """
<mujoco>
  <option timestep="0.005"/>
  <worldbody>
    <body name="link">
      <joint name="hinge" type="hinge" axis="0 1 0" damping="0.3"/>
      <geom type="capsule" fromto="0 0 0 0.4 0 0" size="0.03" mass="1.3"/>
    </body>
  </worldbody>
  <actuator><motor name="drive" joint="hinge" gear="1"/></actuator>
</mujoco>"""
PARAMS = ["body:link:mass", "joint:hinge:damping"]
TRUE = np.array([1.3, 0.3])


def record(model, push, steps=80):
    d = mujoco.MjData(model)
    mujoco.mj_forward(model, d)
    qpos0, qvel0 = d.qpos.copy(), d.qvel.copy()
    ctrl = np.array([[push * np.sin(0.05 * t)] for t in range(steps)])
    qpos, qvel = [], []
    for t in range(steps):
        d.ctrl[:] = ctrl[t]
        mujoco.mj_step(model, d)
        qpos.append(d.qpos.copy())
        qvel.append(d.qvel.copy())
    return sysid.Trajectory(qpos0, qvel0, ctrl, np.array(qpos), np.array(qvel))


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
