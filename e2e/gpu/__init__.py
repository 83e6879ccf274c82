"""What the GPU tier's plans check and read before anything is installed.

    driver.py               `python -m e2e.gpu.driver`: the CUDA driver and glibc sglang's wheels need
    interpreter.py          `python -m e2e.gpu.interpreter`: the base interpreter the venvs are built on,
                            and which packages import from its system site
    miles_image.py          `python -m e2e.gpu.miles_image`: Miles' image (Miles, its SGLang, train.py,
                            Megatron-LM, the model's flags) and its GPUs
    code-golf-v1-miles.toml the Miles variant's config ([taskset] only), as Miles' own E2E writes it
    requirements-miles.txt  the caps pip honours installing the adapter beside Miles' image
"""
