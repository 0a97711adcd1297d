"""The language models of the hybrid-parallel model: the ``llm`` capability of the zoo registry.

The configs live in the one model registry (``traincast/zoo/models.toml``, ``[model.NAME.llm]``
tables); ``ModelConfig`` and its parameter-count formulas are in ``traincast.zoo.llm``
(docs/parallelism.md). This module resolves the names that ``plan`` and ``predict --arch
hybrid`` take: ``zoo:NAME`` (or a bare name or alias), ``hf:path/to/config.json`` and
``hf:NAME`` of a shipped Hub checkpoint (``zoo/hub.toml``), else, where transformers is
installed, a model in the local Hugging Face cache or a bare ``model_type`` (its default
config: ``zoo.llm.from_transformers``).
"""

from __future__ import annotations

from traincast.errors import TraincastError
from traincast.zoo.llm import ModelConfig, config_from_table, from_hf_config, from_transformers
from traincast.zoo.registry import canonical_name, get_llm, llm_names

__all__ = ["ModelConfig", "config_from_table", "from_hf_config", "get_model", "list_models"]


def list_models() -> list[str]:
    """Names of the zoo models that have a decoder-only LLM config."""
    return llm_names()


def get_model(name: str) -> ModelConfig:
    """``gpt3-175b``, ``zoo:llama2-70b`` (or an alias) or ``hf:path/to/config.json`` ->
    ``ModelConfig``; a zoo model without an LLM config (a CNN, BERT, ...) is an error that says
    which commands it works with."""
    if name.startswith("hf:"):

        from traincast.zoo.hub import decoder_config, local_config

        path = local_config(name[3:])  # as profile reads it (~ expanded, a folder's config)
        if path is not None:
            return from_hf_config(path)
        # a shipped checkpoint, a cached Hub name or a bare model_type; else no such file
        return decoder_config(name[3:]) or from_transformers(name[3:]) or from_hf_config(name[3:])
    if canonical_name(name) is None:
        raise TraincastError(f"unknown language model {name!r}",
                             hint=f"zoo models with an LLM config: {', '.join(llm_names())}; "
                                  "or hf:config.json")
    return get_llm(name)
