"""vf-sglang: run Verifiers V1 environments against an SGLang-served policy.

The package speaks HTTP only; it never imports sglang. Heavy imports (verifiers, renderers,
transformers) happen lazily inside the modules that need them.
"""

__version__ = "0.1.0"
