"""The reference model zoo (torch.nn only) and its precomputed, torch-free profiles.

``traincast.zoo.ZOO`` lists the models (no torch needed); ``get_model(name).build_meta()``
builds one on the meta device; ``traincast.zoo.profiles.workload_features(name)`` reads the
shipped profile of a model or trace workload tag without torch.
"""

from traincast.zoo.registry import ZOO, ZooEntry, get_model

__all__ = ["ZOO", "ZooEntry", "get_model"]
