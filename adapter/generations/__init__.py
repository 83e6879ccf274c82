"""One shim per Verifiers API generation (A: 0.2.x; B: 0.3.x/0.4.0, not served yet).

Everything outside this package is generation-neutral. Import a shim only after
`adapter.versions.require_supported()` picked it: each imports its Verifiers release eagerly.
"""
