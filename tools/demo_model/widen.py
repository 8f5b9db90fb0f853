"""Widen trained demo weights to a larger channel configuration (a warm start for train.py --init).

    python3 widen.py --init OLD.safetensors --channels 40,64,96,96 --out WIDE.safetensors

Why by hand: this is Net2Net-style widening (Chen et al. 2016) specialised to this graph; no
library does it for a custom PyTorch model.

Every tensor whose channel width grows keeps its old channels and gains new ones. The new
channels are placed inside the existing GroupNorm groups (groups are contiguous channel ranges and
their number is fixed, so a group of 10 becomes a group of 12): old channel c of group g moves to
g * G_new + (c mod G_old), and the new slots at the end of each group start as copies of the
group's first channels. So, at every width:

* a new output channel (conv or linear row, bias, GroupNorm weight and bias) copies its source
  channel, plus a little noise that lets the copies drift apart;
* a new input channel (conv or linear column) gets weight 0, so nothing downstream sees the
  copies until training moves those weights;
* a depth-to-space 1x1 conv (channel k = s * C + c) is remapped per sub-position s;
* the attention's q and k rows of new channels start at 0 (q) and small noise (k), so the dot
  products are unchanged, and q is rescaled by sqrt(C_new / C_old) so that the softmax scale
  1 / sqrt(C) stays what the weights were trained with.

The function is preserved except through the GroupNorm statistics (a group's mean and variance now
count its copied channels twice); the first training steps absorb that. The output carries the
input's metadata (steps and training time included) with the new configuration.
"""

from __future__ import annotations

import argparse
import math
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from train import load_init  # noqa: E402
from vae import VideoVAE  # noqa: E402


def channel_map(old: int, new: int, groups: int):
    """For each new channel index, (old index, is_copy): old channels keep their group."""
    go, gn = old // groups, new // groups
    out = []
    for n in range(new):
        g, r = divmod(n, gn)
        if r < go:
            out.append((g * go + r, False))
        else:
            out.append((g * go + (r - go) % go, True))
    return out


def widen_dim(t: torch.Tensor, dim: int, old_c: int, new_c: int, groups: int, role: str,
              gen: torch.Generator, noise: float) -> torch.Tensor:
    """Widen axis `dim` of t from old_c * s to new_c * s (s sub-positions of a depth-to-space
    conv, channel k = j * C + c). role 'out': copies (+ noise); 'in': zeros for new channels."""
    s = t.shape[dim] // old_c
    cmap = channel_map(old_c, new_c, groups)
    parts = []
    for j in range(s):
        for c_new, (c_old, copy) in enumerate(cmap):
            src = t.narrow(dim, j * old_c + c_old, 1)
            if copy and role == "in":
                parts.append(torch.zeros_like(src))
            elif copy:
                scale = src.abs().mean().clamp_min(1e-8)
                parts.append(src + noise * scale * torch.randn(src.shape, generator=gen))
            else:
                parts.append(src)
    return torch.cat(parts, dim)


def widen(sd, old_ch, new_ch, groups, seed=0, noise=1e-2):
    gen = torch.Generator().manual_seed(seed)
    target = VideoVAE(new_ch, groups).state_dict()
    widths = {}
    for o, n in zip(old_ch, new_ch):
        if o != n:
            if widths.get(o, n) != n:
                raise SystemExit(f"width {o} maps to both {widths[o]} and {n}")
            widths[o] = n
    out = {}
    for name, want in target.items():
        t = sd[name].float()
        if t.dim() != want.dim():
            raise SystemExit(f"{name}: rank {t.dim()} vs {want.dim()}")
        for dim in range(t.dim()):
            o, n = t.shape[dim], want.shape[dim]
            if o == n:
                continue
            bases = [c for c in widths if o % c == 0 and n == o // c * widths[c]]
            if len(bases) != 1:
                raise SystemExit(f"{name}: axis {dim} {o} -> {n} is "
                                 f"{'no known' if not bases else 'an ambiguous'} widening")
            base = bases[0]
            role = "out" if dim == 0 else "in"
            if name.endswith(("to_q.weight", "to_q.bias")) and role == "out":
                t = widen_dim(t, 0, base, widths[base], groups, "in", gen, 0.0)  # zero rows
            elif name.endswith(("to_k.weight", "to_k.bias")) and role == "out":
                t = widen_dim(t, 0, base, widths[base], groups, "in", gen, 0.0)
                cmap = channel_map(base, widths[base], groups)
                for c_new, (_, copy) in enumerate(cmap):
                    if copy:
                        t[c_new].normal_(0.0, 1e-3, generator=gen)
            else:
                t = widen_dim(t, dim, base, widths[base], groups, role, gen, noise)
        if t.shape != want.shape:
            raise SystemExit(f"{name}: got {tuple(t.shape)}, want {tuple(want.shape)}")
        if name.endswith(("to_q.weight", "to_q.bias")):
            c_old = sd[name].shape[0]
            t = t * math.sqrt(want.shape[0] / c_old)
        out[name] = t.contiguous()
    return out


def self_test():
    """Checks on a small random model (CPU, seconds); raises AssertionError on failure.

    1. Widening to the same channels changes nothing.
    2. Every old channel keeps its values at its new index, and new input columns are 0.
    3. The widened model computes nearly the same function: on a random clip its output is
       within 35 % (relative RMS) of the original's, and a third or less of what a wrong channel
       map (the widened channels reversed) gives. Random weights exaggerate the GroupNorm effect
       (measured 0.245 against 1.226): a trained [32, 64, 80, 80] model widened to
       [40, 64, 96, 96] reconstructs crops of the held-out clips within 34-38 dB PSNR of the
       original model's own output."""
    torch.manual_seed(0)
    old_ch, new_ch, groups = [16, 32, 40, 40], [20, 32, 48, 48], 4
    small = VideoVAE(old_ch, groups)
    with torch.no_grad():  # trained-like weights: non-trivial norms, biases and attention
        for p in small.parameters():
            p.add_(0.05 * torch.randn_like(p))
    sd = {k: v.clone() for k, v in small.state_dict().items()}
    same = widen(sd, old_ch, old_ch, groups)
    assert all(torch.equal(same[k], sd[k]) for k in sd), "same channels changed a tensor"
    wide = widen(sd, old_ch, new_ch, groups)
    w = "decoder.up_blocks.1.resnets.1.conv1.weight"  # 40 -> 48, both axes
    cmap = channel_map(40, 48, groups)
    for n, (o, copy) in enumerate(cmap):
        if not copy:
            keep = [m for m, (_, c) in enumerate(cmap) if not c]
            assert torch.equal(wide[w][n][keep], sd[w][o]), f"{w}: old channel {o} moved"
        else:
            assert torch.all(wide[w][:, n] == 0), f"{w}: new input channel {n} is not 0"
    big = VideoVAE(new_ch, groups)
    big.load_state_dict(wide)
    x = torch.rand(1, 3, 9, 32, 32) * 2 - 1
    with torch.no_grad():
        y0, y1 = small(x), big(x)
    rel = ((y1 - y0).pow(2).mean() / y0.pow(2).mean()).sqrt().item()
    perm = {k: v.clone() for k, v in wide.items()}
    for k, v in perm.items():  # a wrong mapping: the widened channels out of order
        if v.dim() >= 1 and v.shape[0] == 48:
            perm[k] = v.flip(0)
    big.load_state_dict(perm)
    with torch.no_grad():
        y2 = big(x)
    bad = ((y2 - y0).pow(2).mean() / y0.pow(2).mean()).sqrt().item()
    print(f"self-test: relative RMS change {rel:.4f} (wrong map: {bad:.4f})")
    assert rel < 0.35, f"widened model is off by {rel:.3f}"
    assert bad > 3 * rel, "the check cannot tell a wrong channel map"


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--self-test", action="store_true", help="run the checks and exit")
    ap.add_argument("--init", help="exported weights (fp16 file or fp32 shard)")
    ap.add_argument("--channels", help="new block_out_channels, e.g. 40,64,96,96")
    ap.add_argument("--out", help="output: fp32 shards FILE-fp32-0000k-of-0000n")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--noise", type=float, default=1e-2, help="relative noise on copied rows")
    args = ap.parse_args()
    if args.self_test:
        self_test()
        print("self-test passed")
        return
    if not (args.init and args.channels and args.out):
        ap.error("--init, --channels and --out are required")
    import json
    from train import write_weights  # noqa: E402
    sd, meta = load_init(args.init)
    old_ch = [int(c) for c in meta["seedvae.block_out_channels"].split(",")]
    groups = int(meta["seedvae.norm_groups"])
    new_ch = [int(c) for c in args.channels.split(",")]
    wide = widen(sd, old_ch, new_ch, groups, args.seed, args.noise)
    meta = dict(meta)
    meta["seedvae.block_out_channels"] = ",".join(str(c) for c in new_ch)
    meta["demo.parameters"] = str(sum(v.numel() for v in wide.values()))
    meta["demo.widened_from"] = json.dumps({"channels": old_ch, "steps": meta.get("demo.steps")})
    paths = write_weights(args.out, wide, meta, shard=True)
    n_old = sum(v.numel() for v in sd.values())
    n_new = sum(v.numel() for v in wide.values())
    print(f"widened {old_ch} -> {new_ch}: {n_old:,} -> {n_new:,} parameters; {paths}")


if __name__ == "__main__":
    main()
