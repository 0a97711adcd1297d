"""Modern parallelism for language models: ZeRO/FSDP, tensor, pipeline and expert parallelism.

``models`` holds the analytic model configs, ``strategies`` the per-strategy formulas
(communication volumes, pipeline bubble, memory per GPU), ``hybrid`` composes them into one
iteration time for arrays of configurations, ``plan`` searches the configurations of a cluster.
Formulas: docs/parallelism.md.
"""
