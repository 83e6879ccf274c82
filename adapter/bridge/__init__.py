"""The bridge: Renderers' `/inference/v1/generate` answered by SGLang, behind two doors.

Owns: the one typed handler and its ASGI app (`handler`), the in-process door that Verifiers'
TrainClient calls without HTTP (`direct`), serving the app on a loopback port (`serve`), and the
per-session memory: first turns, attempt budgets (`sessions`), engine stats (`stats`, `lru`).
May import: `adapter.errors`, `adapter.config`, `adapter.wire`, `adapter.engine`.
"""
