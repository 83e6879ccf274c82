"""The Verifiers side: episodes run through the installed Verifiers release.

Owns: one shim per Verifiers API generation (`generations/`), the harness program held to the
host's versions (`harness_pins`) and its uv environment (`harness_uv`, `caches`), the pre-forked
harness runtime (`prefork`, `zygotes`, and `zygote_program`, the stdlib-only program a warm
interpreter runs), the reaper that ends what a process' episodes left running once the
process is gone, however it ended (`reaper`, and `reaper_program`, the stdlib-only program it
starts), the renderer identity (`identity`), the tokenizer imports a renderer pool needs first
(`tokenizer_imports`) and the bundled tasksets (`bundled/`, package data).
May import: `errors`, `config`, `wire`, `engine`, `bridge`, `versions`, `samples`.
"""
