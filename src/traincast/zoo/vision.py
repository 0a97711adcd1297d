"""Image models in plain torch.nn: ResNet-50/101, MobileNetV2, ViT-B/16 (torchvision, timm)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

NUM_CLASSES = 1000
IMAGE = 224


class Classifier(nn.Module):
    """A backbone whose training loss is the cross-entropy against integer labels."""

    def __init__(self, net: nn.Module) -> None:
        super().__init__()
        self.net = net

    def forward(self, images: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(self.net(images), labels)


def image_inputs(batch: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``batch`` 3x224x224 fp32 images and their class labels (seeded)."""
    gen = torch.Generator().manual_seed(0)
    return (torch.randn(batch, 3, IMAGE, IMAGE, generator=gen),
            torch.randint(0, NUM_CLASSES, (batch,), generator=gen))


# -- ResNet-50 (v1.5: stride on the 3x3 conv, as torchvision) ----------------------------------

class Bottleneck(nn.Module):
    """1x1 -> 3x3 -> 1x1 with ``planes x 4`` output channels; ResNeXt's block with ``groups``
    (cardinality) and ``base_width`` (channels per group at 64 planes): the inner width is
    ``planes base_width / 64 x groups`` and the 3x3 convolution is grouped (Xie et al. 2017,
    Fig. 3(c); torchvision's ``Bottleneck``)."""

    expansion = 4

    def __init__(self, cin: int, planes: int, stride: int, groups: int = 1,
                 base_width: int = 64) -> None:
        super().__init__()
        cout = planes * self.expansion
        width = planes * base_width // 64 * groups
        self.conv1 = nn.Conv2d(cin, width, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, stride, 1, groups=groups, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = nn.Conv2d(width, cout, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(cout)
        self.downsample = None
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                            nn.BatchNorm2d(cout))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu(self.bn1(self.conv1(x)))
        out = F.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return F.relu(out + (x if self.downsample is None else self.downsample(x)))


class ResNet(nn.Module):
    def __init__(self, layers: tuple[int, ...] = (3, 4, 6, 3), groups: int = 1,
                 base_width: int = 64) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 64, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        blocks, cin = [], 64
        for i, n in enumerate(layers):
            planes = 64 * 2 ** i
            for j in range(n):
                blocks.append(Bottleneck(cin, planes, 2 if (j == 0 and i > 0) else 1,
                                         groups, base_width))
                cin = planes * Bottleneck.expansion
        self.layers = nn.Sequential(*blocks)
        self.fc = nn.Linear(cin, NUM_CLASSES)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.max_pool2d(F.relu(self.bn1(self.conv1(x))), 3, 2, 1)
        x = self.layers(x)
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


def resnet50() -> nn.Module:
    return Classifier(ResNet((3, 4, 6, 3)))


def resnet101() -> nn.Module:
    """ResNet-101: bottleneck stages of 3, 4, 23, 3 blocks (He et al. 2016, Table 1)."""
    return Classifier(ResNet((3, 4, 23, 3)))


def resnext101_32x4d() -> nn.Module:
    """ResNeXt-101 32x4d: ResNet-101's stages with cardinality 32 and 4 channels per group at
    64 planes (inner widths 128, 256, 512, 1024; Xie et al. 2017, Table 1 and Sec. 5.1)."""
    return Classifier(ResNet((3, 4, 23, 3), groups=32, base_width=4))


# -- MobileNetV2 ---------------------------------------------------------------------------------

def _conv_bn(cin: int, cout: int, k: int, stride: int, groups: int = 1,
             act: bool = True) -> nn.Sequential:
    layers: list[nn.Module] = [nn.Conv2d(cin, cout, k, stride, (k - 1) // 2, groups=groups,
                                         bias=False), nn.BatchNorm2d(cout)]
    if act:
        layers.append(nn.ReLU6())
    return nn.Sequential(*layers)


class InvertedResidual(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int, expand: int) -> None:
        super().__init__()
        hidden = cin * expand
        layers: list[nn.Module] = [_conv_bn(cin, hidden, 1, 1)] if expand != 1 else []
        layers += [_conv_bn(hidden, hidden, 3, stride, groups=hidden),
                   _conv_bn(hidden, cout, 1, 1, act=False)]
        self.conv = nn.Sequential(*layers)
        self.residual = stride == 1 and cin == cout

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.conv(x) if self.residual else self.conv(x)


class MobileNetV2(nn.Module):
    # (expansion t, channels c, repeats n, stride s), Sandler et al. 2018, Table 2
    SETTINGS = ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1),
                (6, 160, 3, 2), (6, 320, 1, 1))

    def __init__(self) -> None:
        super().__init__()
        layers: list[nn.Module] = [_conv_bn(3, 32, 3, 2)]
        cin = 32
        for t, c, n, s in self.SETTINGS:
            for i in range(n):
                layers.append(InvertedResidual(cin, c, s if i == 0 else 1, t))
                cin = c
        layers.append(_conv_bn(cin, 1280, 1, 1))
        self.features = nn.Sequential(*layers)
        self.dropout = nn.Dropout(0.2)
        self.classifier = nn.Linear(1280, NUM_CLASSES)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.adaptive_avg_pool2d(self.features(x), 1).flatten(1)
        return self.classifier(self.dropout(x))


def mobilenet_v2() -> nn.Module:
    return Classifier(MobileNetV2())


# -- ViT-B/16 ------------------------------------------------------------------------------------

class Attention(nn.Module):
    """Multi-head self-attention through ``F.scaled_dot_product_attention`` (fused qkv)."""

    def __init__(self, dim: int, heads: int, bias: bool = True) -> None:
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim, bias=bias)
        self.proj = nn.Linear(dim, dim, bias=bias)

    def forward(self, x: torch.Tensor, causal: bool = False) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.heads, d // self.heads).permute(
            2, 0, 3, 1, 4).unbind(0)
        out = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        return self.proj(out.transpose(1, 2).reshape(b, t, d))


class PreLNBlock(nn.Module):
    """Pre-LayerNorm transformer block: x + attn(ln(x)); x + mlp(ln(x))."""

    def __init__(self, dim: int, heads: int, hidden: int, gelu: str = "none",
                 causal: bool = False, eps: float = 1e-6) -> None:
        super().__init__()
        self.ln_1 = nn.LayerNorm(dim, eps=eps)
        self.attn = Attention(dim, heads)
        self.ln_2 = nn.LayerNorm(dim, eps=eps)
        self.fc = nn.Linear(dim, hidden)
        self.proj = nn.Linear(hidden, dim)
        self.gelu = gelu
        self.causal = causal

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln_1(x), self.causal)
        return x + self.proj(F.gelu(self.fc(self.ln_2(x)), approximate=self.gelu))


class ViT(nn.Module):
    def __init__(self, dim: int = 768, depth: int = 12, heads: int = 12, patch: int = 16) -> None:
        super().__init__()
        n = (IMAGE // patch) ** 2
        self.patch_embed = nn.Conv2d(3, dim, patch, patch)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, dim))
        self.pos_embed = nn.Parameter(torch.zeros(1, n + 1, dim))
        self.blocks = nn.Sequential(*[PreLNBlock(dim, heads, 4 * dim) for _ in range(depth)])
        self.norm = nn.LayerNorm(dim, eps=1e-6)
        self.head = nn.Linear(dim, NUM_CLASSES)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.patch_embed(x).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls_token.expand(x.shape[0], -1, -1), x], dim=1) + self.pos_embed
        return self.head(self.norm(self.blocks(x))[:, 0])


def vit_b16() -> nn.Module:
    return Classifier(ViT())
