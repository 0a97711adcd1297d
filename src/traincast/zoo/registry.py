"""The reference models: names, families, default batches, published sizes (no torch here).

Each entry names the function that builds it (``module:function`` inside traincast.zoo) and the
function that makes one batch of inputs; both need torch and are imported on first use.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any

from traincast.errors import TraincastError


@dataclass(frozen=True)
class ZooEntry:
    """One reference model.

    ``published_params`` is the parameter count its source gives (exact where the source gives
    a count to the unit, else rounded as published); ``params_exact`` says which.
    """

    name: str
    family: str
    description: str
    default_batch: int
    input_shape: str
    published_params: int
    params_exact: bool
    source: str
    builder: str  # "module:function" in traincast.zoo; function() -> nn.Module
    inputs_fn: str  # "module:function"; function(batch) -> tuple of CPU tensors
    meta_only: bool = False
    resident_inputs: bool = False  # inputs stay in GPU memory across iterations

    def _resolve(self, ref: str) -> Any:
        module, func = ref.split(":")
        return getattr(importlib.import_module(f"traincast.zoo.{module}"), func)

    def build_meta(self) -> Any:
        """The model on the meta device (no memory allocated)."""
        import torch

        with torch.device("meta"):
            return self._resolve(self.builder)()

    def inputs(self, batch: int) -> tuple:
        """One batch of inputs (CPU tensors; integer ids carry real values)."""
        return self._resolve(self.inputs_fn)(batch)

    def build_cpu(self, batch: int) -> tuple[Any, tuple]:
        """(model on CPU with initialized weights, inputs) for the CPU fallback."""
        if self.meta_only:
            raise TraincastError(f"zoo:{self.name} is profiled on the meta device only")
        return self._resolve(self.builder)(), self.inputs(batch)


ZOO: dict[str, ZooEntry] = {e.name: e for e in (
    ZooEntry("resnet50", "cnn", "ResNet-50 v1.5 image classifier, ImageNet (1000 classes)",
             64, "3x224x224 image", 25_557_032, True,
             "He et al. 2016; torchvision resnet50 (25,557,032 params)",
             "vision:resnet50", "vision:image_inputs"),
    ZooEntry("mobilenet-v2", "cnn", "MobileNetV2 (width 1.0) image classifier, ImageNet",
             128, "3x224x224 image", 3_504_872, True,
             "Sandler et al. 2018; torchvision mobilenet_v2 (3,504,872 params)",
             "vision:mobilenet_v2", "vision:image_inputs"),
    ZooEntry("vit-b16", "transformer", "ViT-Base/16 image classifier at 224x224, ImageNet",
             64, "3x224x224 image", 86_567_656, True,
             "Dosovitskiy et al. 2021; timm vit_base_patch16_224 (86,567,656 params)",
             "vision:vit_b16", "vision:image_inputs"),
    ZooEntry("transformer-nmt", "transformer",
             "Transformer-base encoder-decoder translation model, WMT14 En-De shared "
             "37k BPE vocabulary, tied embeddings, label-smoothed loss",
             128, "32 source + 32 target tokens", 65_000_000, False,
             "Vaswani et al. 2017, Table 3 (base: 65M params)",
             "text:transformer_nmt", "text:nmt_inputs"),
    ZooEntry("bert-base", "transformer",
             "BERT-base pre-training (masked LM + next sentence), 30,522 WordPiece vocabulary",
             32, "128 tokens", 110_106_428, True,
             "Devlin et al. 2019 (110M); Hugging Face BertForPreTraining bert-base-uncased "
             "(110,106,428 params)",
             "text:bert_base", "text:bert_inputs"),
    ZooEntry("bert-large", "transformer",
             "BERT-large pre-training (masked LM + next sentence), 30,522 WordPiece vocabulary",
             16, "128 tokens", 336_226_108, True,
             "Devlin et al. 2019 (340M); Hugging Face BertForPreTraining bert-large-uncased "
             "(336,226,108 params)",
             "text:bert_large", "text:bert_inputs"),
    ZooEntry("gpt2", "transformer", "GPT-2 small (124M) causal language model, context 1024",
             8, "1024 tokens", 124_439_808, True,
             "Radford et al. 2019; Hugging Face gpt2 (124,439,808 params)",
             "text:gpt2", "text:gpt2_inputs"),
    ZooEntry("gpt2-xl", "transformer", "GPT-2 XL (1.5B) causal language model, context 1024",
             1, "1024 tokens", 1_557_611_200, True,
             "Radford et al. 2019; Hugging Face gpt2-xl (1,557,611,200 params)",
             "text:gpt2_xl", "text:gpt2_inputs"),
    ZooEntry("llama-7b", "transformer",
             "LLaMA-7B decoder (RMSNorm, rotary, SwiGLU), context 2048; meta device only",
             1, "2048 tokens", 6_738_415_616, True,
             "Touvron et al. 2023; Hugging Face LlamaForCausalLM 7B (6,738,415,616 params)",
             "text:llama_7b", "text:llama_inputs", meta_only=True),
    ZooEntry("speech", "rnn",
             "DeepSpeech2-style acoustic model: 2 conv layers, 5 bidirectional GRU layers of "
             "800 units, CTC over 29 characters; 10 s of 161-bin spectrogram",
             32, "161x1000 spectrogram", 0, False,
             "Amodei et al. 2016 (architecture); no single published count: hand formula",
             "speech:deepspeech2", "speech:speech_inputs"),
    ZooEntry("multi-interest", "recommender",
             "MIND-style multi-interest retrieval model: 1.7M-item embedding table (sparse "
             "gradients), capsule routing to 4 interests, label-aware attention, sampled softmax",
             256, "50 history items + 1 target + 1024 shared negatives", 0, False,
             "Li et al. 2019 (MIND, architecture); item count of Taobao UserBehavior as used by "
             "Cen et al. 2020 (ComiRec): hand formula",
             "recsys:multi_interest", "recsys:mind_inputs"),
    ZooEntry("dlrm", "recommender",
             "DLRM on Criteo Kaggle: 26 embedding tables (33.76M rows, dim 16, sparse "
             "gradients), bottom MLP 13-512-256-64-16, top MLP 367-512-256-1",
             128, "13 dense + 26 sparse features", 540_677_217, True,
             "Naumov et al. 2019; facebookresearch/dlrm Kaggle configuration (table sizes of "
             "the Criteo Kaggle dataset)",
             "recsys:dlrm", "recsys:dlrm_inputs"),
    ZooEntry("gcn", "gnn",
             "Two-layer GCN (hidden 128) on a Reddit-sized graph: 232,965 nodes, 114,615,892 "
             "edges, 602 features, 41 classes; sparse adjacency as an edge list",
             232_965, "nodes of the graph (full batch)", 82_473, True,
             "Kipf & Welling 2017 (GCN); Hamilton et al. 2017 (Reddit graph sizes as in PyG)",
             "graph:gcn", "graph:gcn_inputs", resident_inputs=True),
)}


def get_model(name: str) -> ZooEntry:
    """The zoo entry ``name`` (a clear error listing the names if unknown)."""
    if name in ZOO:
        return ZOO[name]
    hint = f"zoo models: {', '.join(ZOO)}"
    try:
        from traincast.parallel.models import list_models

        if name in list_models():
            hint = (f"{name} is an analytic language-model config without a module to "
                    "profile: use `traincast plan` or `predict --arch hybrid`")
    except ImportError:
        pass
    raise TraincastError(f"unknown zoo model {name!r}", hint=hint)
