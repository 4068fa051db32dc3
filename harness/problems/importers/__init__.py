"""Importers: existing problem suites loaded unchanged into a ``Problem``.

``gpumode``: GPU MODE reference-kernels (``reference.py`` + ``task.yml``);
``kernelbench``: KernelBench (``Model``, ``get_inputs``, ``get_init_inputs``).
"""
