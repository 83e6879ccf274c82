"""The real SGLang router (smg) as processes, and what it does to the prefix cache.

    smg.py    smg and engines started as processes (tests/router, benchmarks, the miles lane)
    cache.py  `python -m e2e.router.cache`: the prefix-cache hit rate per router policy (sglang-cpu's
              tests/real_sglang/test_router_cache.py; the figures in docs/router.md)
"""
