"""Reusable conformance checks for anything that speaks SGLang's wire to Verifiers.

`conformance.traces` builds real Verifiers traces for tests; `conformance.sglang_outputs`
builds SGLang `/generate` outputs in the engine's exact shape.
"""
