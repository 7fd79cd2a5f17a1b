"""Patch-wise convolutions as a matmul: the same outputs as the stock convolution on every
family's real inputs, the same parameters and state dict, and token counts without a vision pass."""

from __future__ import annotations

import pytest
import torch
from PIL import Image
from torch import nn

from ltopd.models.loading import load_backbone, save_backbone
from ltopd.models.patch_linear import PatchLinearConv2d, PatchLinearConv3d, linearize_patch_convs
from ltopd.twins.architectures import twin_backbone
from ltopd.twins.tokenizer import build_tokenizer

ONE_TWIN_PER_FAMILY = ["qwen35-tiny", "glm46v-tiny", "llava-ov-tiny"]
STOCK = {PatchLinearConv3d: nn.Conv3d, PatchLinearConv2d: nn.Conv2d}


@pytest.fixture(scope="module")
def tok():
    return build_tokenizer(["What colour is the square? A. red B. blue"] * 20, 400)


def _record(seed: int, size: tuple[int, int]) -> dict:
    g = torch.Generator().manual_seed(seed)
    pixels = torch.randint(0, 256, (size[1], size[0], 3), generator=g, dtype=torch.uint8)
    return {"question": "What colour?", "options": [], "images": [Image.fromarray(pixels.numpy())]}


def _linearized(model: nn.Module) -> dict[str, nn.Module]:
    return {n: m for n, m in model.named_modules() if type(m) in STOCK}


@pytest.mark.parametrize("twin", ONE_TWIN_PER_FAMILY)
def test_every_patch_conv_is_linearized_and_matches_the_stock_conv(twin, tok):
    bb = twin_backbone(twin, tok, seed=1)
    convs = _linearized(bb.model)
    assert convs, "the twin's patch embedding was not switched"
    leftovers = [n for n, m in bb.model.named_modules() if type(m) in (nn.Conv2d, nn.Conv3d)]
    assert leftovers == []
    captured: dict[str, torch.Tensor] = {}
    hooks = [m.register_forward_pre_hook(lambda mod, args, name=n: captured.setdefault(name, args[0]))
             for n, m in convs.items()]
    batch = bb.encode([_record(1, (128, 128)), _record(2, (96, 160))])
    with torch.no_grad():
        bb.image_features(batch)
    for h in hooks:
        h.remove()
    assert set(captured) == set(convs)
    for name, x in captured.items():
        module = convs[name]
        with torch.no_grad():
            ours = module(x)
            stock = STOCK[type(module)].forward(module, x)  # the library's convolution, same weights
        assert ours.shape == stock.shape
        torch.testing.assert_close(ours, stock, rtol=1e-5, atol=1e-5)


def test_gradients_match_the_stock_conv():
    conv = nn.Conv3d(3, 8, kernel_size=(2, 4, 4), stride=(2, 4, 4))
    x = torch.randn(5, 3, 2, 4, 4)
    ref = conv(x).square().sum()
    (g_ref,) = torch.autograd.grad(ref, conv.weight)
    linearize_patch_convs(nn.Sequential(conv))
    ours = conv(x).square().sum()
    (g_ours,) = torch.autograd.grad(ours, conv.weight)
    torch.testing.assert_close(ours, ref, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(g_ours, g_ref, rtol=1e-4, atol=1e-5)


def test_only_patchwise_convs_switch_and_twice_is_a_no_op():
    model = nn.Sequential(nn.Conv2d(3, 4, 2, stride=2), nn.Conv2d(4, 4, 3, padding=1), nn.Conv2d(4, 4, 2, stride=1))
    assert linearize_patch_convs(model) == ["0"]
    assert linearize_patch_convs(model) == []
    x = torch.randn(2, 3, 8, 6)
    torch.testing.assert_close(model[0](x), nn.Conv2d.forward(model[0], x))
    odd = torch.randn(1, 3, 7, 6)  # not a whole number of patches: the stock path
    torch.testing.assert_close(model[0](odd), nn.Conv2d.forward(model[0], odd))


@pytest.mark.parametrize("twin", ONE_TWIN_PER_FAMILY)
def test_state_dict_unchanged_and_loading_linearizes(twin, tok, tmp_path):
    bb = twin_backbone(twin, tok, seed=1)
    stock = twin_backbone(twin, tok, seed=1).model
    for m in stock.modules():  # undo the switch on a second copy: the library's own modules
        if type(m) in STOCK:
            m.__class__ = STOCK[type(m)]
    assert list(bb.model.state_dict()) == list(stock.state_dict())
    save_backbone(bb, tmp_path / "m")
    loaded = load_backbone(tmp_path / "m")
    assert set(_linearized(loaded.model)) == set(_linearized(bb.model))


@pytest.mark.parametrize("twin", ONE_TWIN_PER_FAMILY)
def test_full_selection_counts_tokens_without_the_vision_tower(twin, tok, monkeypatch):
    bb = twin_backbone(twin, tok, seed=1)
    batch = bb.encode([_record(1, (128, 128)), _record(2, (96, 160))])
    with torch.no_grad():
        sizes = [f.shape[0] for f in bb.image_features(batch)]

    def no_vision(*args, **kwargs):
        raise AssertionError("full_selection ran the vision tower")

    monkeypatch.setattr(type(bb.ops), "image_features", no_vision)
    assert list(bb.full_selection(batch).n_tokens) == sizes
