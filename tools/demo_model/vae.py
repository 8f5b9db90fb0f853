"""The SeedVR2 causal video VAE in PyTorch, as docs/model.md describes it (§1-§3).

This is an independent PyTorch implementation of the architecture the engine implements (no
upstream code was used). It is parameterised by ``block_out_channels`` and
``norm_groups`` so that a small configuration of the *same graph* can be trained; the state-dict key
names are exactly those of docs/model.md §3 (250 tensors for any configuration whose channel
list has the same "changes" as the real one: c0 != c1 != c2 == c3).

Layout everywhere: [B, C, T, H, W]; RGB video in [-1, 1].

Only whole-clip forward passes are implemented (no temporal slicing / streaming state): that is
what training needs, and streaming is exact up to reassociation anyway (docs/model.md §4.3).

Works with PyTorch 1.13 (Debian 12, CPU) and 2.x (GPU machine).
"""

from __future__ import annotations

import math
from typing import List, Sequence, Tuple

import torch
import torch.nn as nn
import torch.nn.functional as F

GN_EPS = 1e-6  # every GroupNorm in the model (docs/model.md §1)


# --------------------------------------------------------------------------------------------
# Primitives (docs/model.md §2.1)
# --------------------------------------------------------------------------------------------

def replicate_first_frame(x: torch.Tensor, n: int) -> torch.Tensor:
    """Prepend ``n`` copies of frame 0 along T (the causal left context of a stateless call)."""
    if n <= 0:
        return x
    head = x[:, :, :1].expand(-1, -1, n, -1, -1)
    return torch.cat([head, x], dim=2)


class CausalConv3d(nn.Conv3d):
    """3-D convolution that is causal in time.

    The parameters live directly on this module (``<prefix>.weight`` / ``<prefix>.bias``), as in the
    checkpoint. The temporal left context is E = kT - 1 copies of the first frame (replicated, not
    zeros); spatial padding is zeros, ``pad_hw`` on each side; the convolution itself pads nothing.
    """

    def __init__(self, cin: int, cout: int, kernel: Tuple[int, int, int],
                 stride: Tuple[int, int, int] = (1, 1, 1), pad_hw: int = 0):
        super().__init__(cin, cout, kernel_size=kernel, stride=stride, padding=0, bias=True)
        self.time_context = kernel[0] - 1
        self.pad_hw = pad_hw

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = replicate_first_frame(x, self.time_context)
        if self.pad_hw:
            p = self.pad_hw
            x = F.pad(x, (p, p, p, p, 0, 0))  # W left/right, H top/bottom, no T padding
        return F.conv3d(x, self.weight, self.bias, self.stride)


def group_norm_per_frame(x: torch.Tensor, norm: nn.GroupNorm) -> torch.Tensor:
    """GroupNorm applied to every frame on its own: statistics over (C/G channels x H x W) of one
    frame, never across frames (docs/model.md §2.1, GroupNorm). Computed in float32 and returned in the input's
    dtype (what the upstream wrapper does under bf16 autocast)."""
    b, c, t, h, w = x.shape
    y = x.transpose(1, 2).reshape(b * t, c, h, w)
    y = _gn32(y, norm)
    return y.reshape(b, t, c, h, w).transpose(1, 2)


def _gn32(y: torch.Tensor, norm: nn.GroupNorm) -> torch.Tensor:
    """F.group_norm in float32 (also under autocast), cast back to y's dtype."""
    out = F.group_norm(y.float(), norm.num_groups, norm.weight.float(), norm.bias.float(), norm.eps)
    return out.to(y.dtype)


class ResnetBlock3D(nn.Module):
    """norm1 -> SiLU -> conv1 (3x3x3) -> norm2 -> SiLU -> conv2 (3x3x3), plus the input (through a
    1x1x1 conv_shortcut when the channel count changes). No time embedding, no dropout."""

    def __init__(self, cin: int, cout: int, groups: int):
        super().__init__()
        self.norm1 = nn.GroupNorm(groups, cin, eps=GN_EPS, affine=True)
        self.conv1 = CausalConv3d(cin, cout, (3, 3, 3), pad_hw=1)
        self.norm2 = nn.GroupNorm(groups, cout, eps=GN_EPS, affine=True)
        self.conv2 = CausalConv3d(cout, cout, (3, 3, 3), pad_hw=1)
        self.conv_shortcut = nn.Conv3d(cin, cout, kernel_size=1) if cin != cout else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.conv1(F.silu(group_norm_per_frame(x, self.norm1)))
        h = self.conv2(F.silu(group_norm_per_frame(h, self.norm2)))
        s = self.conv_shortcut(x) if self.conv_shortcut is not None else x
        return s + h


class Downsample3D(nn.Module):
    """Halve H and W (and T when ``temporal``): zero-pad one column right / one row bottom, then a
    stride-2 conv without padding. The temporal variant is a causal 3x3x3 conv with stride 2 in
    all three axes (2 replicated first frames as context); the spatial one a plain 1x3x3 conv."""

    def __init__(self, c: int, temporal: bool):
        super().__init__()
        if temporal:
            self.conv = CausalConv3d(c, c, (3, 3, 3), stride=(2, 2, 2), pad_hw=0)
        else:
            self.conv = nn.Conv3d(c, c, kernel_size=(1, 3, 3), stride=(1, 2, 2), padding=0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.pad(x, (0, 1, 0, 1, 0, 0))
        return self.conv(x)


class Upsample3D(nn.Module):
    """Depth-to-space upsampling: a 1x1x1 conv to r*C channels (r = 2*2*Z, Z = 2 in time when
    ``temporal``), rearranged so that channel k = ((ih*2 + iw)*Z + it)*C + c lands at
    (c, f*Z + it, 2h + ih, 2w + iw); for the temporal variant the second output frame (frame 1) is
    dropped so that T latent frames give 2T - 1 frames; then a causal 3x3x3 conv."""

    def __init__(self, c: int, temporal: bool):
        super().__init__()
        self.temporal = temporal
        self.z = 2 if temporal else 1
        self.upscale_conv = nn.Conv3d(c, c * 4 * self.z, kernel_size=1)
        self.conv = CausalConv3d(c, c, (3, 3, 3), pad_hw=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, c, t, h, w = x.shape
        z = self.z
        y = self.upscale_conv(x)
        y = y.reshape(b, 2, 2, z, c, t, h, w)          # (ih, iw, it, c) from the channel axis
        y = y.permute(0, 4, 5, 3, 6, 1, 7, 2)          # b, c, t, it, h, ih, w, iw
        y = y.reshape(b, c, t * z, 2 * h, 2 * w)
        if self.temporal:
            # Whole-clip (non-streamed) call: drop output frame 1, keep 0, 2, 3, ...
            y = torch.cat([y[:, :, :1], y[:, :, 2:]], dim=2)
        return self.conv(y)


def _attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """softmax(q k^T / sqrt(d)) v for [N, L, d] tensors (one head)."""
    if hasattr(F, "scaled_dot_product_attention"):  # torch >= 2.0
        return F.scaled_dot_product_attention(q, k, v)
    scale = 1.0 / math.sqrt(q.shape[-1])
    scores = torch.bmm(q, k.transpose(1, 2)) * scale
    return torch.bmm(scores.softmax(dim=-1), v)


class Attention(nn.Module):
    """Single-head spatial self-attention applied to every frame independently, with a residual:
    GN -> q, k, v (Linear C->C) -> softmax(q k^T / sqrt(C)) v -> to_out.0 (Linear) -> + input."""

    def __init__(self, c: int, groups: int):
        super().__init__()
        self.group_norm = nn.GroupNorm(groups, c, eps=GN_EPS, affine=True)
        self.to_q = nn.Linear(c, c)
        self.to_k = nn.Linear(c, c)
        self.to_v = nn.Linear(c, c)
        # Index 0 is the projection; index 1 (dropout p=0 upstream) has no parameters.
        self.to_out = nn.ModuleList([nn.Linear(c, c), nn.Identity()])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, c, t, h, w = x.shape
        frames = x.transpose(1, 2).reshape(b * t, c, h, w)  # every frame is a separate "image"
        n = _gn32(frames, self.group_norm)
        tokens = n.reshape(b * t, c, h * w).transpose(1, 2)  # [BT, N, C]
        q, k, v = self.to_q(tokens), self.to_k(tokens), self.to_v(tokens)
        a = _attention(q, k, v)
        o = self.to_out[0](a)                               # [BT, N, C]
        o = o.transpose(1, 2).reshape(b, t, c, h, w).transpose(1, 2)
        return o + x


class UNetMidBlock3D(nn.Module):
    def __init__(self, c: int, groups: int):
        super().__init__()
        self.resnets = nn.ModuleList([ResnetBlock3D(c, c, groups), ResnetBlock3D(c, c, groups)])
        self.attentions = nn.ModuleList([Attention(c, groups)])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.resnets[0](x)
        x = self.attentions[0](x)
        return self.resnets[1](x)


class DownBlock(nn.Module):
    def __init__(self, cin: int, cout: int, n_resnets: int, groups: int,
                 downsample: bool, temporal: bool):
        super().__init__()
        self.resnets = nn.ModuleList(
            [ResnetBlock3D(cin if j == 0 else cout, cout, groups) for j in range(n_resnets)])
        self.downsamplers = nn.ModuleList([Downsample3D(cout, temporal)]) if downsample else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for r in self.resnets:
            x = r(x)
        if self.downsamplers is not None:
            x = self.downsamplers[0](x)
        return x


class UpBlock(nn.Module):
    def __init__(self, cin: int, cout: int, n_resnets: int, groups: int,
                 upsample: bool, temporal: bool):
        super().__init__()
        self.resnets = nn.ModuleList(
            [ResnetBlock3D(cin if j == 0 else cout, cout, groups) for j in range(n_resnets)])
        self.upsamplers = nn.ModuleList([Upsample3D(cout, temporal)]) if upsample else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for r in self.resnets:
            x = r(x)
        if self.upsamplers is not None:
            x = self.upsamplers[0](x)
        return x


# --------------------------------------------------------------------------------------------
# Encoder / decoder (docs/model.md §2.2, §2.3)
# --------------------------------------------------------------------------------------------

class Encoder3D(nn.Module):
    def __init__(self, channels: Sequence[int], groups: int, in_channels: int = 3,
                 latent_channels: int = 16, layers_per_block: int = 2, temporal_scale_num: int = 2):
        super().__init__()
        n = len(channels)
        self.conv_in = CausalConv3d(in_channels, channels[0], (3, 3, 3), pad_hw=1)
        blocks = []
        for i in range(n):
            cin = channels[i - 1] if i > 0 else channels[0]
            last = i == n - 1
            # Levels i >= n - temporal_scale_num - 1 are "temporal"; the last has no downsampler.
            temporal = i >= n - temporal_scale_num - 1
            blocks.append(DownBlock(cin, channels[i], layers_per_block, groups,
                                    downsample=not last, temporal=temporal))
        self.down_blocks = nn.ModuleList(blocks)
        self.mid_block = UNetMidBlock3D(channels[-1], groups)
        self.conv_norm_out = nn.GroupNorm(groups, channels[-1], eps=GN_EPS, affine=True)
        self.conv_out = CausalConv3d(channels[-1], 2 * latent_channels, (3, 3, 3), pad_hw=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.conv_in(x)
        for blk in self.down_blocks:
            x = blk(x)
        x = self.mid_block(x)
        x = F.silu(group_norm_per_frame(x, self.conv_norm_out))
        return self.conv_out(x)


class Decoder3D(nn.Module):
    def __init__(self, channels: Sequence[int], groups: int, out_channels: int = 3,
                 latent_channels: int = 16, layers_per_block: int = 2, temporal_scale_num: int = 2):
        super().__init__()
        n = len(channels)
        rev = list(reversed(channels))
        self.conv_in = CausalConv3d(latent_channels, rev[0], (3, 3, 3), pad_hw=1)
        self.mid_block = UNetMidBlock3D(rev[0], groups)
        blocks = []
        for i in range(n):
            cin = rev[i - 1] if i > 0 else rev[0]
            last = i == n - 1
            temporal = i < temporal_scale_num
            blocks.append(UpBlock(cin, rev[i], layers_per_block + 1, groups,
                                  upsample=not last, temporal=temporal))
        self.up_blocks = nn.ModuleList(blocks)
        self.conv_norm_out = nn.GroupNorm(groups, rev[-1], eps=GN_EPS, affine=True)
        self.conv_out = CausalConv3d(rev[-1], out_channels, (3, 3, 3), pad_hw=1)

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        x = self.conv_in(z)
        x = self.mid_block(x)
        for blk in self.up_blocks:
            x = blk(x)
        x = F.silu(group_norm_per_frame(x, self.conv_norm_out))
        return self.conv_out(x)


class VideoVAE(nn.Module):
    """Top-level model: ``encoder.*`` and ``decoder.*`` exactly as in the SeedVR2 checkpoint."""

    def __init__(self, block_out_channels: Sequence[int] = (128, 256, 512, 512),
                 norm_groups: int = 32, latent_channels: int = 16):
        super().__init__()
        for c in block_out_channels:
            if c % norm_groups:
                raise ValueError(f"channel count {c} is not a multiple of {norm_groups} groups")
        self.block_out_channels = list(block_out_channels)
        self.norm_groups = norm_groups
        self.latent_channels = latent_channels
        self.encoder = Encoder3D(block_out_channels, norm_groups, latent_channels=latent_channels)
        self.decoder = Decoder3D(block_out_channels, norm_groups, latent_channels=latent_channels)

    def encode(self, x: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        """Video [B,3,T,H,W] (T = 4n+1, H, W multiples of 8) -> (mean, logvar), each
        [B,16,n+1,H/8,W/8]. logvar is clamped to [-30, 20] as the diagonal Gaussian does."""
        m = self.encoder(x)
        mean, logvar = m[:, : self.latent_channels], m[:, self.latent_channels:]
        return mean, logvar.clamp(-30.0, 20.0)

    def encode_moments(self, x: torch.Tensor) -> torch.Tensor:
        """The raw 32-channel encoder output (what the reference tensors call enc_moments)."""
        return self.encoder(x)

    def decode(self, z: torch.Tensor) -> torch.Tensor:
        """Latent [B,16,t,h,w] -> video [B,3,4t-3,8h,8w] (not clamped)."""
        return self.decoder(z)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        mean, _ = self.encode(x)
        return self.decode(mean)


def parameter_count(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def conv_macs_per_pixel(channels: Sequence[int], h: int = 256, w: int = 256, t: int = 17,
                        groups: int = 8) -> Tuple[float, float]:
    """Count multiply-accumulates of one whole-clip encode and decode on the meta device-free
    path (forward hooks on a CPU model with a tiny input would be slow at 256^2, so the count is
    analytic from module shapes traced at a small size and scaled by area). Returns
    (encode MAC per input pixel, decode MAC per output pixel)."""
    model = VideoVAE(channels, groups)
    macs = {"enc": 0, "dec": 0}

    def hook(name):
        def fn(mod, inp, out):
            if isinstance(mod, nn.Conv3d):
                k = mod.weight[0].numel()
                macs[name] += out.numel() // out.shape[0] * k
            elif isinstance(mod, nn.Linear):
                macs[name] += out.numel() // out.shape[0] * mod.in_features if out.dim() == 2 \
                    else out.numel() * mod.in_features
        return fn

    for part in ("encoder", "decoder"):
        for m in getattr(model, part).modules():
            if isinstance(m, (nn.Conv3d, nn.Linear)):
                m.register_forward_hook(hook(part[:3]))
    # Trace at 1/4 of the resolution (same per-pixel cost except attention, which is ~1 %).
    hs, ws = h // 4, w // 4
    with torch.no_grad():
        x = torch.zeros(1, 3, t, hs, ws)
        mean, _ = model.encode(x)
        model.decode(mean)
    px = t * hs * ws
    return macs["enc"] / px, macs["dec"] / px


if __name__ == "__main__":  # quick parameter / cost table for candidate configurations
    import sys
    configs = [[16, 32, 64, 64], [32, 64, 96, 96], [32, 64, 128, 128], [32, 48, 96, 96],
               [24, 48, 96, 96], [32, 64, 112, 112]]
    for ch in configs:
        g = 8 if all(c % 8 == 0 for c in ch) else 4
        m = VideoVAE(ch, g)
        n = parameter_count(m)
        enc, dec = conv_macs_per_pixel(ch, groups=g)
        print(f"{ch} groups {g}: {n:,} params, fp16 {2 * n / 1e6:.1f} MB, "
              f"encode {2 * enc / 1e6:.2f} MFLOP/px, decode {2 * dec / 1e6:.2f} MFLOP/px, "
              f"256x256x17 roundtrip {2 * (enc + dec) * 17 * 256 * 256 / 1e9:.0f} GFLOP")
        sys.stdout.flush()
