"""The E2E plans as data, one module each; `python -m e2e.runner` executes them.

    steps.py       `Step`, `PlanOptions`, the base interpreter and the step builders plans share
    gpu.py         the GPU tier (`--tier gpu`): real SGLang, Qwen3-0.6B, code-golf-v1, verified
    miles_gpu.py   the GPU tier's Miles variant (`--variant miles`): Miles' own E2E in Miles' image
    cpu.py         the CPU tier (`--tier cpu`): the reference engine and the bundled tasksets
    sglang_cpu.py  the GPU tier's SGLang steps on real SGLang on CPU (`--tier sglang-cpu`)
"""
