"""The judges several lanes share.

    verify.py  `python -m e2e.judges.verify`: dumped samples (or Miles' own dump) against the E2E's
               expectations; the GPU tier, the CPU tier, sglang-cpu and miles call it
    turns.py   multi-turn rules on samples + the recorded exchanges that made them (sglang-cpu,
               the router cache, the tool cassettes)
"""
