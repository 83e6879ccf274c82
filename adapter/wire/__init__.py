"""The two wire formats and the pure translation between them (no I/O).

Owns: the typed models of Renderers' generate body and SGLang's `/generate` output (`types`),
strict JSON decoding/encoding (`strict_json`), and Renderers ↔ SGLang translation (`translate`).
May import: `adapter.errors`, `adapter.config`.
"""
