"""Models in and out: URDF (`jaxmb.io.urdf`), MJCF and anything MuJoCo's compiler reads (`jaxmb.io.mjcf`), and the
converters of states, forces and models to MuJoCo (`jaxmb.io.mujoco`) and Pinocchio (`jaxmb.io.pinocchio`)."""
