"""CI as data: the lanes (tox envs, the claims each proves, the paths that touch it), the stages
`.ci/run` runs them in, the runner that times them, and `docs/ci.md` written from a run.

    python3 -m tools.ci run --write docs/ci.md      # what `.ci/run` does (stdlib only: no venv needed)
    python3 -m tools.ci changed [--base REF] [--run] # the lanes a change touches, by its paths
    python3 -m tools.ci stress LANE [--runs N] [--against hog|pair] [--write docs/ci.md]
                                                     # one lane N times, the machine busy beside it
"""
