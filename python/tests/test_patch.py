"""contactkit.patch on programs nobody here wrote: Gymnasium's MuJoCo environments, and
`python -m contactkit` on an unmodified script."""

import pathlib
import subprocess
import sys
import textwrap

import mujoco
import numpy as np
import pytest

import contactkit

gym = pytest.importorskip("gymnasium", reason="gymnasium[mujoco] is in tools/requirements.txt")

MODELS = pathlib.Path(__file__).resolve().parents[2] / "mjcf_models"
ENVS = ["Hopper-v5", "Ant-v5", "Humanoid-v5"]


def episode(name, nstep=150, seed=0):
    """observations and the env's data after nstep random actions (same actions every call)"""
    env = gym.make(name)
    obs, _ = env.reset(seed=seed)
    rng = np.random.default_rng(seed)
    low, high = env.action_space.low, env.action_space.high
    observations = [obs]
    for _ in range(nstep):
        obs, _, terminated, truncated, _ = env.step(rng.uniform(low, high))
        observations.append(obs)
        if terminated or truncated:
            break
    data = env.unwrapped.data
    env.close()
    return np.array(observations), data


@pytest.mark.parametrize("name", ENVS)
def test_mujoco_pass_through_reproduces_the_episode(name):
    plain, _ = episode(name)
    with contactkit.patched(solver="mujoco"):
        patched, data = episode(name)
        assert contactkit.handle_for(data).stats.solver == "mujoco"
    assert plain.shape == patched.shape
    assert np.array_equal(plain, patched)


@pytest.mark.parametrize("solver", ["ipm", "comfree", "lcp"])
@pytest.mark.parametrize("name", ENVS)
def test_every_solver_runs_the_environment(name, solver):
    plain, _ = episode(name, nstep=100)
    with contactkit.patched(solver=solver):
        obs, data = episode(name, nstep=100)
        h = contactkit.handle_for(data)
        assert h is not None and h.stats.solver == solver
    assert np.isfinite(obs).all()
    # the solver changed the motion (a different contact model) once contact has happened
    n = min(len(plain), len(obs))
    assert not np.array_equal(plain[:n], obs[:n])


def test_unpatch_restores_mujoco():
    original = mujoco.mj_step
    with contactkit.patched(solver="ipm"):
        assert mujoco.mj_step is not original and contactkit.is_patched()
    assert mujoco.mj_step is original and not contactkit.is_patched()


def test_bad_settings_leave_mujoco_unpatched():
    original = mujoco.mj_step
    with pytest.raises(ValueError, match="unknown setting"):
        contactkit.patch(solver="ipm", kapa_tol=1e-8)
    assert mujoco.mj_step is original


def test_handles_follow_data_and_reset():
    m = mujoco.MjModel.from_xml_path(str(MODELS / "box_on_plane.xml"))
    with contactkit.patched(solver="lcp"):
        d = mujoco.MjData(m)
        mujoco.mj_step(m, d)
        h = contactkit.handle_for(d)
        assert h.stats.solver == "lcp"
        mujoco.mj_step(m, d)
        assert contactkit.handle_for(d) is h, "one handle per data"
        assert contactkit.handle_for(mujoco.MjData(m)) is None
        mujoco.mj_resetData(m, d)
        assert np.array_equal(d.qpos, m.qpos0)


def run_module(args, script):
    return subprocess.run([sys.executable, "-m", "contactkit", *args, str(script)],
                          capture_output=True, text=True)


def test_python_m_contactkit_runs_an_unmodified_script(tmp_path):
    script = tmp_path / "sim.py"
    script.write_text(textwrap.dedent(f"""
        import sys, mujoco, contactkit
        m = mujoco.MjModel.from_xml_path({str(MODELS / "box_on_plane.xml")!r})
        d = mujoco.MjData(m)
        for _ in range(20):
            mujoco.mj_step(m, d)
        h = contactkit.handle_for(d)
        print(h.stats.solver, h.settings["kappa_tol"], sys.argv[1:])
    """))
    out = run_module(["--solver", "ipm", "--set", "kappa_tol=1e-7"], script)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split()[:2] == ["ipm", "1e-07"]
    bad = run_module(["--set", "kappa_tol=2"], script)
    assert bad.returncode == 2 and "kappa_tol" in bad.stderr and "range" in bad.stderr
