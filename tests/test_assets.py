"""`jaxmb.assets`: the shipped quadruped's standing configuration, checked by its kinematics."""

import numpy as np

import jaxmb
from checks import assert_close
from jaxmb import assets, sim
from jaxmb.sim.geometry import geom_poses, geometry


def test_quadruped_standing_puts_each_foot_under_its_hip_above_the_floor():
    """With a free base: the trunk upright at 0.35 m, every leg at hip flexion 0.7 and knee -1.4 (by joint name),
    each foot sphere straight under its hip flexion axis (to 1e-12: thigh and calf of one length, bent
    symmetrically) and 2.4 cm above the floor (to 1e-3); fixed to the world, the same leg angles."""
    model = assets.quadruped()
    q = assets.quadruped_standing()
    assert q.shape == (model.nq,)
    np.testing.assert_array_equal(q[:7], [0, 0, 0.35, 1, 0, 0, 0])
    for joint in model.joint_names[1:]:
        kind = joint.split("_", 1)[1]
        assert q[model.joint_coordinates(joint)[0]] == {"hip_abduction": 0.0, "hip_flexion": 0.7, "knee": -1.4}[kind]
    T = jaxmb.forward_kinematics(model, q)
    feet = sim.urdf_geometry(assets.path("quadruped.urdf"), model)
    feet_p = np.asarray(geom_poses(geometry(model, feet), T).p)
    hips = np.asarray(T.p)[[model.body_names.index(f"{g.body[:2]}_thigh") for g in feet]]
    assert_close(feet_p[:, :2], hips[:, :2], 1e-12)
    assert np.abs(feet_p[:, 2] - np.array([g.size[0] for g in feet]) - 0.024).max() < 1e-3
    fixed = assets.quadruped(floating_base=False)
    np.testing.assert_array_equal(assets.quadruped_standing(floating_base=False), q[7:])
    assert fixed.joint_names == model.joint_names[1:]
