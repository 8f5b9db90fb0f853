#!/usr/bin/env python3
"""PSNR of a checkpoint on the held-out clips, measured by our engine (seedvae roundtrip, CPU).

  python3 tools/demo_model/eval_clips.py --weights demo.safetensors [--seedvae PATH] [--torch]

For every clip directory in resources/demo/clips/ it runs
  seedvae roundtrip <clip> --weights W --size 256x256 --frames 17 --backend cpu --json -q
and prints PSNR/SSIM per clip and the mean. --torch additionally runs vae.py (PyTorch, fp32,
whole clip) on the same frames as a cross-check of the engine (needs python3-torch, python3-pil).
Exit status 1 if any clip is below --min-psnr (default 26 dB).
"""

import argparse
import glob
import json
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.normpath(os.path.join(HERE, "..", ".."))


def find_seedvae():
    for p in ("build/release/app/seedvae", "build/app/seedvae", "build-cpu/app/seedvae"):
        q = os.path.join(REPO, p)
        if os.access(q, os.X_OK):
            return q
    return shutil.which("seedvae")


def load_clip(clip, frames=17):
    """The first `frames` frames of a clip directory as a [1, 3, T, H, W] float tensor in [-1, 1]."""
    import numpy as np
    import torch
    from PIL import Image
    files = sorted(f for f in os.listdir(clip) if not f.startswith(".") and f != "README.md")[:frames]
    if len(files) < frames:
        raise SystemExit(f"{clip}: {len(files)} frames, need {frames}")
    fr = np.stack([np.asarray(Image.open(os.path.join(clip, f)).convert("RGB")) for f in files])
    return torch.from_numpy(fr).float().permute(3, 0, 1, 2).unsqueeze(0) / 127.5 - 1


def psnr_8bit(y, x):
    """Whole-clip and per-frame PSNR (dB) of y against x ([1, 3, T, H, W] in [-1, 1]) after the
    8-bit rounding the engine applies before measuring."""
    import math
    a = (x.float().clamp(-1, 1) + 1) * 127.5
    b = (y.float().clamp(-1, 1) + 1) * 127.5
    se = (a.round() - b.round()).pow(2)
    whole = 10 * math.log10(255.0 ** 2 / max(se.mean().item(), 1e-10))
    per_frame = [10 * math.log10(255.0 ** 2 / max(v, 1e-10)) for v in se.mean(dim=(0, 1, 3, 4)).tolist()]
    return whole, per_frame


def torch_psnr(weights, clip):
    import torch
    sys.path.insert(0, HERE)
    import safetensors_io as st
    from vae import VideoVAE
    sd, meta = st.load(weights)
    ch = [int(c) for c in meta["seedvae.block_out_channels"].split(",")]
    model = VideoVAE(ch, int(meta["seedvae.norm_groups"])).eval()
    model.load_state_dict({k: v.float() for k, v in sd.items()})
    x = load_clip(clip)
    with torch.no_grad():
        y = model(x)
    return psnr_8bit(y, x)[0]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--weights", required=True)
    ap.add_argument("--clips", default=os.path.join(REPO, "resources", "demo", "clips"))
    ap.add_argument("--seedvae", default=None)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--min-psnr", type=float, default=26.0)
    ap.add_argument("--torch", action="store_true", help="also compute PSNR with vae.py")
    args = ap.parse_args()
    exe = args.seedvae or find_seedvae()
    if not exe:
        print("seedvae not found: build it or pass --seedvae")
        return 2
    clips = sorted(d for d in glob.glob(os.path.join(args.clips, "*")) if os.path.isdir(d))
    res = []
    for c in clips:
        cmd = [exe, "roundtrip", c, "--weights", args.weights, "--size", "256x256", "--frames", "17",
               "--backend", "cpu", "--json", "-q"]
        if args.threads:
            cmd += ["--threads", str(args.threads)]
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode != 0:
            print(f"{os.path.basename(c)}: seedvae failed ({p.returncode}): {p.stderr.strip()[-500:]}")
            return 3
        r = json.loads(p.stdout)
        line = (f"{os.path.basename(c):10s} PSNR {r['psnr_db']:6.2f} dB  SSIM {r['ssim']:.4f}  "
                f"encode {r['encode_seconds']:.1f} s  decode {r['decode_seconds']:.1f} s")
        if args.torch:
            line += f"   | vae.py PSNR {torch_psnr(args.weights, c):6.2f} dB"
        print(line, flush=True)
        res.append(r["psnr_db"])
    if not res:
        print(f"no clips in {args.clips}")
        return 2
    print(f"mean PSNR {sum(res) / len(res):.2f} dB over {len(res)} clips; min {min(res):.2f} dB "
          f"(target >= {args.min_psnr} dB)")
    return 0 if min(res) >= args.min_psnr else 1


if __name__ == "__main__":
    sys.exit(main())
