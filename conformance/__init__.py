"""Reusable conformance checks for anything that speaks SGLang's wire to Verifiers.

`conformance.traces` builds real Verifiers traces for tests; `conformance.sglang_outputs`
builds SGLang `/generate` outputs in the engine's exact shape. `conformance.miles_table`
generates a stand-in `miles` package from Miles' field table (fixtures/miles), and
`conformance.miles_checks` applies the checks Miles makes on a rollout function's output.
"""
