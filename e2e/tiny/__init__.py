"""The tiny model's lane-only variants: the recipes only the lanes build (the product's own recipe,
its build and its cache stay in `adapter/reference/tiny_model.py`, which the demo uses).

    variants.py  arith_only (the router and RL lanes), default_harness (sglang-cpu's default-harness
                 episodes), tool_rl (the RL lane), is_planted (whether a build holds planted heads)
"""
