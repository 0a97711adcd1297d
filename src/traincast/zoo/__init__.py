"""The reference model zoo: one registry of ``zoo:`` names, torch.nn modules, LLM configs.

``traincast.zoo.MODELS`` lists every zoo model with its capabilities (no torch needed):
``torch`` (``get_model(name).build_meta()`` builds it on the meta device) and ``llm``
(``get_llm(name)``: a decoder-only config for the hybrid-parallel model). ``ZOO`` is the subset
with a torch module; ``lookup(name).build_meta()`` / ``.meta_model(batch)`` also build a model
known only by its decoder-only config, through transformers.
``traincast.zoo.profiles.workload_features(name)`` reads the shipped profile of a model or trace
workload tag without torch.
"""

from traincast.zoo.registry import MODELS, ZOO, ZooEntry, get_llm, get_model, lookup

__all__ = ["MODELS", "ZOO", "ZooEntry", "get_llm", "get_model", "lookup"]
