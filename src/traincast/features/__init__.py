"""Per-iteration features of a training job: reading them, and profiling real models."""

from traincast.features.io import load_features, write_features

__all__ = ["load_features", "write_features"]
