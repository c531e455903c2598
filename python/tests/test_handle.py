"""contactkit.Handle on mujoco's own MjModel / MjData: pass-through, solvers, Jacobians, errors."""

import ctypes
import gc
import os
import pathlib
import subprocess
import sys
import threading

import mujoco
import numpy as np
import pytest

import contactkit

MODELS = pathlib.Path(__file__).resolve().parents[2] / "mjcf_models"


def load(name):
    return mujoco.MjModel.from_xml_path(str(MODELS / name))


def test_mujoco_pass_through_is_bit_exact():
    m = load("stacked_primitives.xml")
    d1, d2 = mujoco.MjData(m), mujoco.MjData(m)
    h = contactkit.Handle(m, solver="mujoco")
    for _ in range(200):
        mujoco.mj_step(m, d1)
        h.step(m, d2)
    assert d1.ncon > 0
    assert np.array_equal(d1.qpos, d2.qpos) and np.array_equal(d1.qvel, d2.qvel)
    assert np.array_equal(d1.qacc_warmstart, d2.qacc_warmstart)
    assert h.stats.solver == "mujoco"


def test_step_nstep_equals_repeated_steps():
    m = load("hopper.xml")
    d1, d2 = mujoco.MjData(m), mujoco.MjData(m)
    h1, h2 = contactkit.Handle(m, solver="ipm"), contactkit.Handle(m, solver="ipm")
    d1.ctrl[:] = d2.ctrl[:] = 0.3
    h1.step(m, d1, nstep=50)
    for _ in range(50):
        h2.step(m, d2)
    assert np.array_equal(d1.qpos, d2.qpos)


def test_hard_contact_solvers_penetrate_less_than_mujoco():
    # a box thrown down onto the plane at 3 m/s: deepest contact over the impact
    m = load("box_on_plane.xml")
    depth = {}
    for solver in ("mujoco", "ipm", "lcp"):
        d = mujoco.MjData(m)
        d.qpos[2] += 0.3
        d.qvel[2] = -3
        h = contactkit.Handle(m, solver=solver)
        depth[solver] = 0
        for _ in range(300):
            h.step(m, d)
            depth[solver] = max(depth[solver], h.stats.max_penetration)
        assert h.stats.solver == solver and h.stats.ncon > 0
    assert depth["ipm"] < 0.2 * depth["mujoco"] and depth["lcp"] < 0.2 * depth["mujoco"], depth


def test_settings_round_trip_and_switch():
    m = load("box_on_plane.xml")
    h = contactkit.Handle(m, solver="ipm", kappa_tol=1e-8, warmstart=False)
    s = h.settings
    assert s["solver"] == "ipm" and s["kappa_tol"] == 1e-8 and s["warmstart"] == 0
    h.set(m, solver="comfree", stiffness=0.3)
    assert h.settings["solver"] == "comfree" and h.settings["stiffness"] == 0.3
    d = mujoco.MjData(m)
    h.step(m, d, nstep=10)
    assert h.stats.solver == "comfree"
    with pytest.raises(ValueError, match="kappa_tol"):
        h.set(m, kappa_tol=2.0)
    assert h.settings["solver"] == "comfree", "a rejected change keeps the previous settings"


def test_settings_from_the_model_plugin_tag():
    xml = """<mujoco><extension><plugin plugin="contactkit.solver"><instance name="c">
      <config key="solver" value="lcp"/><config key="cfm" value="1e-6"/></instance></plugin>
      </extension><worldbody><geom type="plane" size="1 1 .1"/><body pos="0 0 .2"><freejoint/>
      <geom size=".1"/></body></worldbody></mujoco>"""
    m = mujoco.MjModel.from_xml_string(xml)  # import contactkit registered the plugin
    assert contactkit.settings_from_model(m)["solver"] == "lcp"
    h = contactkit.Handle(m)
    assert h.settings["solver"] == "lcp" and h.settings["cfm"] == 1e-6
    # keywords apply on top of the model's settings
    h2 = contactkit.Handle(m, solver="ipm")
    assert h2.settings["solver"] == "ipm" and h2.settings["cfm"] == 1e-6


@pytest.mark.parametrize("solver", ["mujoco", "ipm", "comfree", "lcp"])
def test_transition_jac_matches_centered_differences(solver):
    # a box sliding at 2 m/s, tilted and 2 mm deep (no contact at a switching point)
    m = load("box_sliding.xml")
    d = mujoco.MjData(m)
    mujoco.mj_resetDataKeyframe(m, d, 0)
    d.qpos[2] -= 0.002
    d.qpos[3:7] = [np.cos(0.01), 0.6 * np.sin(0.01), 0.8 * np.sin(0.01), 0]
    # ipm: gradients at the step's own central-path value (the exact derivative of the step)
    settings = {"kappa_grad": 1e-10} if solver == "ipm" else {}
    h = contactkit.Handle(m, solver=solver, **settings)
    A, B, C, D = h.transition_jac(m, d)
    assert h.last_jacobian_method == "analytic"
    assert h.last_jacobian_fallback == contactkit.Fallback.NONE
    nx = 2 * m.nv + m.na
    assert A.shape == (nx, nx) and B.shape == (nx, m.nu)
    Af, Bf, _, _ = h.transition_fd(m, d, eps=1e-6, centered=True)
    err = np.abs(A - Af).max() / max(1.0, np.abs(Af).max())
    assert err < 1e-5, err


def test_transition_jac_writes_given_arrays_and_vjp_agrees():
    m = load("hopper.xml")
    d = mujoco.MjData(m)
    h = contactkit.Handle(m, solver="comfree")
    h.step(m, d, nstep=100)
    nx = 2 * m.nv + m.na
    A, B = np.full((nx, nx), np.nan), np.full((nx, m.nu), np.nan)
    outA, outB, outC, outD = h.transition_jac(m, d, A=A, B=B)
    assert outA is A and outB is B and outC is None and outD is None
    assert np.isfinite(A).all() and np.isfinite(B).all()
    rng = np.random.default_rng(0)
    dx = rng.standard_normal(nx)
    gx, gu = h.transition_vjp(m, d, dx=dx)
    np.testing.assert_allclose(gx, A.T @ dx, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(gu, B.T @ dx, rtol=1e-9, atol=1e-9)


def test_transition_jac_direction_lifts_resting_box():
    # lcp's complementarity-aware Jacobians: a resting box's thrust column is zero, and the
    # free-flight h/m in its vertical velocity when the direction asks the box to rise; the
    # product with the direction is the complementarity-aware VJP
    m = load("pushed_box.xml")
    d = mujoco.MjData(m)
    mujoco.mj_resetDataKeyframe(m, d, 0)
    h = contactkit.Handle(m, solver="lcp", complementarity_aware=1)
    h.step(m, d, nstep=200)
    nx, vz = 2 * m.nv, m.nv + 2
    lift = np.zeros(nx)
    lift[2], lift[vz] = -1.0, -0.1
    _, B, _, _ = h.transition_jac(m, d)
    A_up, B_up, _, _ = h.transition_jac(m, d, direction=lift)
    assert abs(B[vz, 1]) < 1e-12
    assert B_up[vz, 1] == pytest.approx(m.opt.timestep / 1.0, rel=1e-10)
    gx, gu = h.transition_vjp(m, d, dx=lift)
    np.testing.assert_allclose(lift @ A_up, gx, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(lift @ B_up, gu, rtol=1e-10, atol=1e-12)
    _, B_down, _, _ = h.transition_jac(m, d, direction=-lift)
    assert np.array_equal(B_down, B)
    with pytest.raises(ValueError):
        h.transition_jac(m, d, direction=np.zeros(3))


def test_transition_jac_leaves_data_unchanged():
    m = load("hopper.xml")
    d = mujoco.MjData(m)
    h = contactkit.Handle(m, solver="lcp")
    h.step(m, d, nstep=50)
    qpos, qvel = d.qpos.copy(), d.qvel.copy()
    h.transition_jac(m, d)
    assert np.array_equal(qpos, d.qpos) and np.array_equal(qvel, d.qvel)


SLIDE_OR_HINGE = """<mujoco><worldbody><body><joint type="{kind}"/>
<geom size="0.1"/></body></worldbody></mujoco>"""


def test_bad_input_raises_with_the_reason():
    m = load("box_on_plane.xml")
    other = load("hopper.xml")
    d = mujoco.MjData(m)
    with pytest.raises(ValueError, match="unknown setting 'kapa_tol'"):
        contactkit.Handle(m, kapa_tol=1e-8)
    with pytest.raises(ValueError, match="out of range"):
        contactkit.Handle(m, kappa_tol=2)
    with pytest.raises(ValueError, match="solver"):
        contactkit.Handle(m, solver="fast")
    with pytest.raises(TypeError, match="MjModel"):
        contactkit.Handle("box_on_plane.xml")
    h = contactkit.Handle(m, solver="ipm")
    with pytest.raises(ValueError, match=f"another model.*nq {m.nq} here, {other.nq} given"):
        h.step(other, mujoco.MjData(other))
    with pytest.raises(ValueError, match=f"another model.*nbody {m.nbody} here, {other.nbody} given"):
        h.step(m, mujoco.MjData(other))
    # the same sizes with another structure (a hinge turned into a slide)
    spec = mujoco.MjModel.from_xml_string(SLIDE_OR_HINGE.format(kind="slide"))
    h2 = contactkit.Handle(mujoco.MjModel.from_xml_string(SLIDE_OR_HINGE.format(kind="hinge")))
    with pytest.raises(ValueError, match="same sizes, different structure"):
        h2.step(spec, mujoco.MjData(spec))
    with pytest.raises(TypeError, match="MjData"):
        h.step(m, None)
    with pytest.raises(ValueError, match="nstep"):
        h.step(m, d, nstep=-1)
    nx = 2 * m.nv + m.na
    with pytest.raises(ValueError, match="shape"):
        h.transition_jac(m, d, A=np.zeros((nx, nx + 1)))
    with pytest.raises(TypeError, match="float64"):
        h.transition_jac(m, d, A=np.zeros((nx, nx), dtype=np.float32))
    with pytest.raises(TypeError, match="C-contiguous"):
        h.transition_jac(m, d, A=np.zeros((nx, nx)).T.copy(order="F"))
    with pytest.raises(ValueError, match="shape"):
        h.transition_vjp(m, d, dx=np.zeros(nx + 1))
    # nothing above changed the state
    assert np.array_equal(d.qpos, mujoco.MjData(m).qpos)


def test_derivatives_off_and_bad_states_are_reported():
    m = load("box_on_plane.xml")
    d = mujoco.MjData(m)
    h = contactkit.Handle(m, solver="ipm", derivatives=False)
    with pytest.raises(RuntimeError, match="derivatives"):
        h.transition_jac(m, d)
    h = contactkit.Handle(m, solver="ipm")
    d.qvel[0] = np.nan
    with pytest.raises(ValueError, match="reset"):
        h.transition_jac(m, d)
    assert np.isnan(d.qvel[0]), "the state is left as it was"


def test_finite_difference_fallback_says_why():
    # noslip iterations have no analytic tangent: the Jacobian comes from differences, with why
    m = load("box_sliding.xml")
    m.opt.noslip_iterations = 3
    d = mujoco.MjData(m)
    mujoco.mj_resetDataKeyframe(m, d, 0)
    h = contactkit.Handle(m, solver="mujoco")
    h.transition_jac(m, d)
    assert h.last_jacobian_method == "finite_differences"
    assert "noslip" in h.last_jacobian_reason
    assert h.last_jacobian_fallback == contactkit.Fallback.NOSLIP
    assert contactkit.fallback_text(h.last_jacobian_fallback) in h.last_jacobian_reason


def test_fallback_codes_mirror_the_c_api():
    # one Python name per ckFallback, each with its text; NONE has none
    assert len(contactkit.Fallback) == len(contactkit._core.fallback_texts())
    assert contactkit.fallback_text(contactkit.Fallback.NONE) == ""
    assert all(contactkit.fallback_text(r) for r in contactkit.Fallback if r)
    with pytest.raises(ValueError):
        contactkit.fallback_text(len(contactkit.Fallback))


class _MallInfo2(ctypes.Structure):
    # glibc's struct mallinfo2 (glibc >= 2.33; Debian 12 has 2.36)
    _fields_ = [(name, ctypes.c_size_t) for name in
                "arena ordblks smblks hblks hblkhd usmblks fsmblks uordblks fordblks keepcost".split()]


def heap_in_use_kb():
    # bytes malloc has handed out and not had back (all arenas, plus mmapped blocks); unlike RSS it
    # does not move with fragmentation or with what other tests left in the allocator's free lists
    libc = ctypes.CDLL("libc.so.6")
    libc.mallinfo2.restype = _MallInfo2
    info = libc.mallinfo2()
    return (info.uordblks + info.hblkhd) // 1024


def test_handles_are_freed_when_collected():
    m = load("box_on_plane.xml")
    d = mujoco.MjData(m)

    def churn(n):
        for _ in range(n):
            h = contactkit.Handle(m, solver="ipm")
            h.step(m, d)
        gc.collect()
        return heap_in_use_kb()

    # a leak shows as growth in every batch, so the smallest of three batches is the measure
    last = churn(1000)
    grown = []
    for _ in range(3):
        now = churn(2000)
        grown.append(now - last)
        last = now
    # one ipm handle holds tens of kB: even 100 bytes leaked per handle would be 200 kB per batch
    assert min(grown) < 200, f"heap in use grew by {grown} kB over three batches of 2000 handles"


def test_threads_step_their_own_handles_like_one_thread():
    m = load("stacked_primitives.xml")

    def run(out, i):
        d = mujoco.MjData(m)
        h = contactkit.Handle(m, solver="comfree")
        h.step(m, d, nstep=100)
        out[i] = d.qpos.copy()

    serial = [None]
    run(serial, 0)
    out = [None, None]
    threads = [threading.Thread(target=run, args=(out, i)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert np.array_equal(out[0], serial[0]) and np.array_equal(out[1], serial[0])


def test_import_names_both_versions_on_a_mismatch():
    code = ("import mujoco; mujoco.__version__ = '3.0.0'\n"
            "try:\n  import contactkit\nexcept ImportError as e:\n  print(e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "3.0.0" in out.stdout and mujoco.__version__ in out.stdout, out.stdout + out.stderr


def test_totals_count_and_solver_info_describes_the_last_solve():
    m = load("box_on_plane.xml")
    d = mujoco.MjData(m)
    h = contactkit.Handle(m, solver="lcp")
    h.step(m, d, 300)
    t = h.totals
    assert t.solves == 300 and t.inexact == 0 and t.nwarning == 0
    assert t.guess_tries > 200 and t.guess_hits > 150  # the box lands, then rests
    info = h.solver_info
    assert info == {"solver": "lcp", "pivots": 0, "guess_tried": True, "guess_hit": True,
                    "budget_spent": 0}
    h.set(solver="ipm")
    h.step(m, d)
    info = h.solver_info
    assert info["solver"] == "ipm" and "pivots" not in info and info["factorizations"] > 0
    # a box resting on the plane: nothing to hold or rescue
    assert info["holds"] == 0 and info["dissipated"] == 0 and info["prox_solved"] == 0
    assert h.totals.solves == 301


def test_adaptive_integrator_reports_its_steps_and_refuses_impulse_solvers():
    m = load("box_sliding.xml")
    d = mujoco.MjData(m)
    h = contactkit.Handle(m, integrator="tsit5", rtol=1e-6, atol=1e-6)
    h.step(m, d, 20)
    info = h.step_info
    assert info["integrator"] == "tsit5" and info["status"] == "ok"
    assert info["accepted"] >= 1 and 0 < info["min_step"] <= m.opt.timestep
    assert d.time == pytest.approx(20 * m.opt.timestep, abs=1e-12)
    with pytest.raises(ValueError, match="tsit5 or dopri5 with solver mujoco"):
        contactkit.Handle(m, solver="lcp", integrator="tsit5")
    with pytest.raises(ValueError, match="one of: model, tsit5, dopri5"):
        contactkit.Handle(m, integrator="rk45")
