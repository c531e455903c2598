"""Helpers shared by the tests."""

import copy

import mujoco


def move_param(m: mujoco.MjModel, array, index, value: float, mass: bool) -> None:
    """array[index] to value; for a body's mass also the subtree masses and dof_M0 that
    mj_setConst derives from it (Handle.param_jac's meaning of a mass; not invweight0, which
    scales constraints), taken from mj_setConst on a copy"""
    array[index] = value
    if mass:
        c = copy.copy(m)
        mujoco.mj_setConst(c, mujoco.MjData(c))
        m.body_subtreemass[:] = c.body_subtreemass
        m.dof_M0[:] = c.dof_M0
