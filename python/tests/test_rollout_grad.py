"""Handle.rollout_grad: reverse mode over a rollout against centered differences of the same loss,
Python errors raised through the C sweep, shapes checked."""

import pathlib

import mujoco
import numpy as np
import pytest

import contactkit
from support import move_param

MODELS = pathlib.Path(__file__).resolve().parents[2] / "mjcf_models"
T = 30


def setup(solver):
    m = mujoco.MjModel.from_xml_path(str(MODELS / "hopper.xml"))
    d0 = mujoco.MjData(m)
    d0.ctrl[:] = 0.3
    for _ in range(50):  # foot on the floor, away from the joint limits
        mujoco.mj_step(m, d0)
    h = contactkit.Handle(m, solver=solver, anchor=0) if solver == "comfree" else \
        contactkit.Handle(m, solver=solver)
    ctrl = 0.4 * np.cos(0.3 * np.arange(T * m.nu)).reshape(T, m.nu)
    w = np.sin(0.5 + np.arange(m.nv))
    return m, d0, h, ctrl, w


def loss_of(m, w):
    # 0.5 |qvel|^2 + w . qpos (the hopper's joints are all slides and hinges)
    def loss(t, data):
        dx = np.concatenate([w, data.qvel])
        return 0.5 * data.qvel @ data.qvel + w @ data.qpos, dx, None
    return loss


def plain(m, d0, h, ctrl, w):
    d = mujoco.MjData(m)
    mujoco.mj_copyData(d, m, d0)
    h.reset()
    total = 0.0
    for t in range(T):
        d.ctrl[:] = ctrl[t]
        h.step(m, d)
        total += 0.5 * d.qvel @ d.qvel + w @ d.qpos
    return total


@pytest.mark.parametrize("solver", ["mujoco", "comfree", "lcp"])
def test_rollout_grad_matches_centered_differences(solver):
    m, d0, h, ctrl, w = setup(solver)
    d = mujoco.MjData(m)
    mujoco.mj_copyData(d, m, d0)
    h.reset()
    value, gx, gu = h.rollout_grad(m, d, ctrl, loss_of(m, w))
    assert gu.shape == (T, m.nu) and gx.shape == (2 * m.nv,)
    assert value == plain(m, d0, h, ctrl, w)
    eps = 1e-6
    fu = np.zeros_like(ctrl)
    for k in np.ndindex(ctrl.shape):
        c = ctrl.copy()
        c[k] += eps
        lp = plain(m, d0, h, c, w)
        c[k] -= 2 * eps
        fu[k] = (lp - plain(m, d0, h, c, w)) / (2 * eps)
    fv = np.zeros(m.nv)  # the velocity half of dL/dx0
    for i in range(m.nv):
        x = mujoco.MjData(m)
        mujoco.mj_copyData(x, m, d0)
        x.qvel[i] += eps
        lp = plain(m, x, h, ctrl, w)
        x.qvel[i] -= 2 * eps
        fv[i] = (lp - plain(m, x, h, ctrl, w)) / (2 * eps)
    assert np.linalg.norm(gu - fu) < 1e-5 * np.linalg.norm(fu)
    assert np.linalg.norm(gx[m.nv:] - fv) < 1e-5 * np.linalg.norm(fv)


def test_rollout_grad_raises_the_loss_error_and_checks_shapes():
    m, d0, h, ctrl, w = setup("mujoco")
    d = mujoco.MjData(m)

    def failing(t, data):
        if t == 4:
            raise KeyError("no target for step 4")
        return 0.0, None, None

    with pytest.raises(KeyError, match="no target for step 4"):
        h.rollout_grad(m, d, ctrl, failing)
    with pytest.raises(ValueError, match=r"dx must have shape \(12,\)"):
        h.rollout_grad(m, d, ctrl, lambda t, data: (0.0, np.zeros(3), None))
    with pytest.raises(ValueError, match=r"ctrl must have shape \(nstep, 3\)"):
        h.rollout_grad(m, d, ctrl[:, :2], loss_of(m, w))
    with pytest.raises(TypeError, match="must return"):
        h.rollout_grad(m, d, ctrl, lambda t, data: 1.0)
    a = contactkit.Handle(m, solver="comfree", anchor=1)
    with pytest.raises(RuntimeError, match="anchor = 0"):
        a.rollout_grad(m, d, ctrl, loss_of(m, w))


def _field(m, name):
    """The model field a parameter name of these tests moves (array, index)."""
    fields = {
        "body:box:mass": lambda: (m.body_mass, m.body("box").id),
        "gravity:2": lambda: (m.opt.gravity, 2),
        "geom:box_geom:friction:0": lambda: (m.geom_friction, (m.geom("box_geom").id, 0)),
        "joint:thigh_joint:damping":
            lambda: (m.dof_damping, m.jnt_dofadr[m.joint("thigh_joint").id]),
        "actuator:leg_motor:gainprm:0":
            lambda: (m.actuator_gainprm, (m.actuator("leg_motor").id, 0)),
    }
    return fields[name]()


@pytest.mark.parametrize("solver", ["mujoco", "comfree"])
@pytest.mark.parametrize("scene,names", [
    ("pushed_box", ["body:box:mass", "gravity:2", "geom:box_geom:friction:0"]),
    ("hopper", ["joint:thigh_joint:damping", "actuator:leg_motor:gainprm:0"]),
])
def test_rollout_grad_params_match_centered_differences(solver, scene, names):
    m = mujoco.MjModel.from_xml_path(str(MODELS / f"{scene}.xml"))
    d0 = mujoco.MjData(m)
    key = "slide" if scene == "pushed_box" else "stand"
    mujoco.mj_resetDataKeyframe(m, d0, m.key(key).id)
    lo, hi = m.actuator_ctrlrange[:, 0], m.actuator_ctrlrange[:, 1]
    ctrl = d0.ctrl + 0.05 * (hi - lo) * np.sin(0.1 * np.arange(T)[:, None] + np.arange(m.nu))
    mujoco.mj_forward(m, d0)
    h = contactkit.Handle(m, solver=solver, anchor=0) if solver == "comfree" else \
        contactkit.Handle(m, solver=solver)
    w = np.cos(1.0 + 2 * np.arange(m.nv))

    def loss(t, data):  # 0.5 |qvel|^2 + w . qvel
        return 0.5 * data.qvel @ data.qvel + w @ data.qvel, \
            np.concatenate([np.zeros(m.nv), data.qvel + w]), None

    def rollout():
        d = mujoco.MjData(m)
        mujoco.mj_copyData(d, m, d0)
        h.reset()
        total = 0.0
        for t in range(T):
            d.ctrl[:] = ctrl[t]
            h.step(m, d)
            total += loss(t, d)[0]
        return total

    before = m.body_mass.copy(), m.opt.gravity.copy(), m.geom_friction.copy()
    d = mujoco.MjData(m)
    mujoco.mj_copyData(d, m, d0)
    h.reset()
    value, gx, gu, gp, how = h.rollout_grad(m, d, ctrl, loss, params=names)
    assert gp.shape == (len(names),) and how.shape == (len(names),)
    assert value == rollout()
    assert np.array_equal(m.body_mass, before[0]) and np.array_equal(m.opt.gravity, before[1])
    assert np.array_equal(m.geom_friction, before[2])
    for k, name in enumerate(names):
        # friction: differences; a mass in contact analytic (with the rows' regularizer)
        assert how[k] == (1 if "friction" in name else 0), name
        array, i = _field(m, name)
        p = array[i]
        eps = 1e-6 * (1 + abs(p))
        derived = name.endswith(":mass")
        move_param(m, array, i, p + eps, derived)
        lp = rollout()
        move_param(m, array, i, p - eps, derived)
        lm = rollout()
        move_param(m, array, i, p, derived)
        fd = (lp - lm) / (2 * eps)
        assert abs(gp[k] - fd) <= 1e-5 * abs(fd), (name, gp[k], fd)
    # the plain call returns three values and the same control gradient
    mujoco.mj_copyData(d, m, d0)
    h.reset()
    _, _, gu0 = h.rollout_grad(m, d, ctrl, loss)
    assert np.array_equal(gu0, gu)


def test_rollout_grad_params_refuse_bad_names():
    m, d0, h, ctrl, w = setup("mujoco")
    d = mujoco.MjData(m)
    with pytest.raises(ValueError, match="unknown parameter"):
        h.rollout_grad(m, d, ctrl, loss_of(m, w), params=["joint:thigh_joint:colour"])
    with pytest.raises(ValueError, match="at least one parameter"):
        h.rollout_grad(m, d, ctrl, loss_of(m, w), params=[])
    assert np.array_equal(d.qpos, m.qpos0)  # refused before any step
