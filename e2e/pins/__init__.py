"""The matrix cells' transitive pins, data only: `<cell>.txt` is every package tox.ini's `contract-vf*`
cell installs, pinned (its deps read `-c` this file); `python -m tools.canary pins` writes them.
contract-vf040.txt also pins `e2e-vf040` and sglang-cpu's generation-B venv."""
