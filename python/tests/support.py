"""Helpers shared by the tests."""

import mujoco
import numpy as np

from contactkit import sysid


def move_param(m: mujoco.MjModel, array, index, value: float, derived: bool) -> None:
    """array[index] to value; for a mass, inertia or armature also what mj_setConst derives
    from it (Handle.param_jac's meaning: as a recompiled model holds it)"""
    array[index] = value
    if derived:
        mujoco.mj_setConst(m, mujoco.MjData(m))


# a pendulum with a damped hinge, a motor and its angle and speed as sensors; its link's mass
# (1.3) and the hinge's damping (0.3) are what the identification tests find (contact-free: the
# cost is smooth in both)
PENDULUM_XML = """
<mujoco>
  <option timestep="0.005"/>
  <worldbody>
    <body name="link">
      <joint name="hinge" type="hinge" axis="0 1 0" damping="0.3"/>
      <geom type="capsule" fromto="0 0 0 0.4 0 0" size="0.03" mass="1.3"/>
    </body>
  </worldbody>
  <actuator><motor name="drive" joint="hinge" gear="1"/></actuator>
  <sensor><jointpos joint="hinge"/><jointvel joint="hinge"/></sensor>
</mujoco>"""


def record_pendulum(model, push, steps=80) -> sysid.Trajectory:
    """mj_step from rest under push sin(0.05 t): the states after each step and the sensors of
    each step"""
    d = mujoco.MjData(model)
    mujoco.mj_forward(model, d)
    qpos0, qvel0 = d.qpos.copy(), d.qvel.copy()
    ctrl = np.array([[push * np.sin(0.05 * t)] for t in range(steps)])
    qpos, qvel, sens = [], [], []
    for t in range(steps):
        d.ctrl[:] = ctrl[t]
        mujoco.mj_step(model, d)
        qpos.append(d.qpos.copy())
        qvel.append(d.qvel.copy())
        sens.append(d.sensordata.copy())
    return sysid.Trajectory(qpos0, qvel0, ctrl, np.array(qpos), np.array(qvel), np.array(sens))
