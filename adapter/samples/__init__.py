"""Traces to Miles samples.

Owns: the `Sample` type in use (Miles' own where it is importable, else the mirror:
`sample_type`, `miles_or_ours`), trace → `Sample` conversion (`conversion`, its token columns
`streams`), weight-version spans
(`weight_spans`) and the batch metrics Miles logs (`metrics`).
May import: `errors`, `config`, `wire`, `engine`, `bridge`, `versions`.
"""
