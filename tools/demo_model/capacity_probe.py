#!/usr/bin/env python3
"""Capacity probe: how well can this configuration reconstruct ONE clip when it is trained on
nothing else?

The demo model is held to 26 dB on every held-out clip (docs/demo-model.md), and boats is the
hardest of them. A model trained on natural data should not do better on a clip than a copy of
itself fine-tuned on that very clip, so this memorisation run is an upper bound for what more
generic training of the same configuration can reach on it. If even memorisation stays below the
bar, no training schedule closes the gap and the configuration (the 20 MB limit) is what limits
it.

It starts from the given weights (normally the shipped model), trains on the clip's exact frames
(no augmentation, the posterior mean decoded, the loss of train.py: L1 + w * MSE, bf16 autocast,
cosine learning rate) and measures the PSNR as eval_clips.py --torch does (fp32, whole clip,
8-bit rounding) every --eval-every steps, then per frame at the end.

The tuned weights are deliberately never written: a model that has seen a held-out clip must not
be shipped or mistaken for one. Output: a JSON report (--json) and the log on stdout.

  python3 tools/demo_model/capacity_probe.py --clip resources/demo/clips/boats \
      --weights resources/demo/demo_vae.safetensors --minutes 8 --json $OUT/probe_boats.json
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time

T_START = time.time()

import torch  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from eval_clips import load_clip, psnr_8bit  # noqa: E402
from train import load_init  # noqa: E402
from vae import VideoVAE  # noqa: E402


@torch.no_grad()
def evaluate(model, x):
    """Whole-clip PSNR and per-frame PSNRs (dB), fp32, after 8-bit rounding (eval_clips --torch)."""
    model.eval()
    y = model(x)
    model.train()
    return psnr_8bit(y, x)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--clip", required=True, help="frame directory (resources/demo/clips/<name>)")
    ap.add_argument("--weights", required=True, help="start weights (fp16 export or fp32 shards)")
    ap.add_argument("--minutes", type=float, required=True, help="wall-clock budget of the script")
    ap.add_argument("--frames", type=int, default=17)
    ap.add_argument("--lr", type=float, default=1e-4)
    ap.add_argument("--warmup", type=int, default=50)
    ap.add_argument("--mse", type=float, default=20.0, help="weight of the MSE term (L1 weight 1)")
    ap.add_argument("--eval-every", type=int, default=250)
    ap.add_argument("--max-steps", type=int, default=0)
    ap.add_argument("--amp", default=None, choices=["bf16", "none"])
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--json", default=None, help="write the report here")
    args = ap.parse_args()

    device = torch.device(args.device)
    if device.type == "cuda":
        torch.backends.cudnn.benchmark = True
        torch.backends.cuda.matmul.allow_tf32 = False  # the evaluation is plain fp32
        torch.backends.cudnn.allow_tf32 = False
    amp = args.amp or ("bf16" if device.type == "cuda" else "none")
    amp_dtype = torch.bfloat16 if amp == "bf16" else None

    sd, meta = load_init(args.weights)
    channels = [int(c) for c in meta["seedvae.block_out_channels"].split(",")]
    groups = int(meta.get("seedvae.norm_groups", 8))
    model = VideoVAE(channels, groups).to(device)
    model.load_state_dict(sd)
    x = load_clip(args.clip, args.frames).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, betas=(0.9, 0.99), weight_decay=0.0)

    start_psnr, start_frames = evaluate(model, x)
    print(f"{os.path.basename(os.path.normpath(args.clip))}: {tuple(x.shape)}, channels {channels}; "
          f"start PSNR {start_psnr:.2f} dB", flush=True)
    curve = [{"step": 0, "seconds": 0.0, "psnr": start_psnr}]
    deadline = T_START + args.minutes * 60 - 20
    t0 = time.time()
    step, step_time = 0, None
    budget = max(1.0, deadline - t0)
    while not (args.max_steps and step >= args.max_steps):
        if time.time() + 2 * (step_time or 0.0) > deadline:
            break
        ts = time.time()
        frac = min(1.0, (ts - t0) / budget)  # cosine over the time budget
        lr = args.lr * min(1.0, (step + 1) / args.warmup) * 0.5 * (1 + math.cos(math.pi * frac))
        for g in opt.param_groups:
            g["lr"] = lr
        with torch.autocast(device.type, dtype=amp_dtype, enabled=amp_dtype is not None):
            moments = model.encoder(x)
            y = model.decoder(moments[:, :16])
        y = y.float()
        loss = (y - x).abs().mean() + args.mse * (y - x).pow(2).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        step += 1
        if step % 25 == 0 and device.type == "cuda":
            torch.cuda.synchronize()
        dt = time.time() - ts
        step_time = dt if step_time is None else 0.9 * step_time + 0.1 * dt
        if step % args.eval_every == 0:
            p, _ = evaluate(model, x)
            curve.append({"step": step, "seconds": round(time.time() - t0, 1), "psnr": p, "lr": lr})
            print(f"step {step:5d}  PSNR {p:.2f} dB  loss {loss.item():.5f}  lr {lr:.2e}  "
                  f"[{time.time() - T_START:.0f}s]", flush=True)

    end_psnr, end_frames = evaluate(model, x)
    curve.append({"step": step, "seconds": round(time.time() - t0, 1), "psnr": end_psnr})
    print(f"end: {step} steps in {time.time() - t0:.0f} s, PSNR {start_psnr:.2f} -> {end_psnr:.2f} dB",
          flush=True)
    print("per frame: " + " ".join(f"{v:.2f}" for v in end_frames), flush=True)
    report = {
        "clip": os.path.normpath(args.clip), "weights": args.weights, "channels": channels,
        "groups": groups, "weights_steps": meta.get("demo.steps"), "steps": step,
        "seconds": round(time.time() - t0, 1), "lr": args.lr, "mse_weight": args.mse, "amp": amp,
        "device": torch.cuda.get_device_name() if device.type == "cuda" else "cpu",
        "torch": torch.__version__, "start_psnr": start_psnr, "end_psnr": end_psnr,
        "start_per_frame": start_frames, "end_per_frame": end_frames, "curve": curve,
        "note": "memorisation upper bound; the tuned weights are not written",
    }
    if args.json:
        tmp = args.json + ".tmp"
        with open(tmp, "w") as f:
            json.dump(report, f, indent=1)
        os.replace(tmp, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
