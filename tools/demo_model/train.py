#!/usr/bin/env python3
"""Train the demo model: a small configuration of the SeedVR2 VAE (vae.py) on clips synthesised
from the freely licensed stills of the data pack (prepare_data.py).

Designed for short GPU calls (< 10 minutes each): the run stops cleanly before --minutes, writes
a checkpoint (model, EMA, optimizer, step, RNG states, log) to --ckpt and resumes from it exactly
on the next call with the same --ckpt. If the checkpoint directory was lost between calls, pass
--init with the weights exported by the previous call (fp32 shards or the fp16 file): training
then continues from those weights with a fresh optimizer (step count and schedule position are
taken from the file's metadata).

Data: every clip is T = 17 frames (4n+1) of a virtual camera moving over a still: random start
and end centre (smooth ease-in-out path, optional acceleration), log-linear zoom, slight rotation,
random scale (1/2 ... 4 source pixels per output pixel, sampled from an anti-aliased pyramid),
random flips and mild colour jitter; crops of 128-256 px (batch scaled to keep pixels per step
about constant). Colours are RGB in [-1, 1]. Stills are chosen uniformly, or with --detail-mix
partly in proportion to their fine detail (StillBank.set_detail_sampling).

Loss: L1 + MSE between the input and the decoding of the posterior MEAN (the engine decodes the
mean), plus KL(q || N(0, I)) at a small weight (default 1e-6, on the sum over latent elements
per pixel element, as in latent-diffusion VAEs). Optionally a fraction of steps decodes a sample.

Outputs at the end (--out FILE.safetensors): the EMA weights in fp16 with the exact checkpoint
key names and a __metadata__ (configuration incl. seedvae.norm_groups, data packages and licences,
steps, losses, validation PSNR, date); next to it FILE-fp32-0000k-of-0000n.safetensors shards
(<= 15 MiB each) of the fp32 EMA weights for a lossless --init; a JSONL log (--log).

Several GPUs (data parallel): start it with torchrun, one process per GPU. Every process
renders its own clips (--batch is per process, so the batch of a step is N times larger), the
gradients are averaged across the processes before clipping and the optimizer step, so the
weights stay identical everywhere. The processes agree at every step on the step time (the LR
schedule runs on training time) and on when to stop; rank 0 alone validates, logs, checkpoints
and exports. A single process draws the same clips as before.

Example (GPU machine, repository root):
  PYTHONUNBUFFERED=1 python3 tools/demo_model/train.py --data .demo-data --ckpt out/demo-ckpt \
      --minutes 8.8 --out $OUT/demo_vae.safetensors --log $OUT/train_log.jsonl
  PYTHONUNBUFFERED=1 torchrun --standalone --nproc-per-node 4 tools/demo_model/train.py ...
"""

from __future__ import annotations

import argparse
import datetime
import glob
import json
import math
import os
import random
import sys
import time

T_START = time.time()

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from PIL import Image  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_io as st  # noqa: E402
from vae import VideoVAE, parameter_count  # noqa: E402

SHARD_BYTES = 15 * 2**20
LINEAGE_KEYS = ("demo.widened_from",)


# --------------------------------------------------------------------------------------------
# Data: stills -> anti-aliased pyramids on the device -> synthetic camera clips
# --------------------------------------------------------------------------------------------

class StillBank:
    """All pack images as uint8 pyramids on the device. Level k is the image reduced by 2^(k/2)
    (Lanczos, so sampling a level with a residual factor < sqrt(2) hardly aliases)."""

    LEVELS = 6  # factors 1, 1.41, 2, 2.83, 4, 5.66

    def __init__(self, data_dir, split, device, min_side=160):
        with open(os.path.join(data_dir, "index.json")) as f:
            self.index = json.load(f)
        entries = [e for e in self.index["images"] if e.get("split", "train") == split]
        self.images = []  # list of lists of [3, H, W] uint8 tensors
        self.names = []
        for e in entries:
            im = Image.open(os.path.join(data_dir, e["file"])).convert("RGB")
            levels = []
            for k in range(self.LEVELS):
                f = 2 ** (k / 2)
                w, h = round(im.width / f), round(im.height / f)
                if min(w, h) < min_side:
                    break
                lk = im if k == 0 else im.resize((w, h), Image.LANCZOS)
                t = torch.from_numpy(np.asarray(lk).copy()).permute(2, 0, 1).contiguous()
                levels.append(t.to(device))
            if levels:
                self.images.append(levels)
                self.names.append(e["file"])
        if not self.images:
            raise SystemExit(f"no '{split}' images in {data_dir}")
        self.probs = None  # uniform choice of stills unless set_detail_sampling() is called

    @staticmethod
    def fine_detail(img):
        """RMS (0-255 scale) of the finest band: the still against a 2x2 box-downsampled,
        bilinearly upsampled copy of itself (docs/demo-model.md): boats' frame 8 measures 12.5,
        the pack's median still ~3."""
        x = img.float().unsqueeze(0)
        h, w = x.shape[-2] // 2 * 2, x.shape[-1] // 2 * 2
        x = x[..., :h, :w]
        low = F.interpolate(F.avg_pool2d(x, 2), size=(h, w), mode="bilinear", align_corners=False)
        return float((x - low).pow(2).mean().sqrt())

    def set_detail_sampling(self, mix, power):
        """Choose stills with probability (1 - mix) / N + mix * d^power / sum(d^power), d the
        fine_detail() of the still at full resolution: more clips of densely detailed content,
        which the pack has few of (14 of its 102 training stills are as detailed as boats)."""
        d = np.array([self.fine_detail(levels[0]) for levels in self.images]) ** power
        n = len(self.images)
        self.probs = (1 - mix) / n + mix * d / d.sum()


def sample_motion(rng: np.random.Generator, size, n_frames, fast_pan_prob=0.0):
    """Random camera parameters (plain floats) for one clip.

    With probability fast_pan_prob the clip is a fast pan: its speed is drawn uniformly in
    [4, 12] output px per frame instead of the lognormal (never a tripod shot). With
    fast_pan_prob 0 no extra random number is drawn, so the fixed validation clips stay the
    same as in earlier calls."""
    scale = float(np.exp(rng.uniform(np.log(0.6), np.log(4.0))))  # source px per output px
    speed = float(np.exp(rng.normal(np.log(2.5), 0.8)))             # output px per frame
    if rng.random() < 0.12:
        speed = 0.0                                                   # tripod shot
    speed = min(speed, 14.0)
    if fast_pan_prob > 0 and rng.random() < fast_pan_prob:
        speed = float(rng.uniform(4.0, 12.0))                         # fast pan
    ang = rng.uniform(0, 2 * np.pi)
    zoom_end = float(np.exp(rng.normal(0.0, 0.08))) if rng.random() < 0.6 else 1.0
    rot_end = float(rng.normal(0.0, 0.02)) if rng.random() < 0.3 else 0.0
    ease = rng.random() < 0.5  # ease-in-out timing vs constant velocity
    accel = float(rng.normal(0.0, 0.3))
    return dict(scale=scale, dx=speed * np.cos(ang) * (n_frames - 1), dy=speed * np.sin(ang) * (n_frames - 1),
                zoom=zoom_end, rot=rot_end, ease=ease, accel=accel,
                u0=float(rng.random()), v0=float(rng.random()),
                flip=bool(rng.random() < 0.5), vflip=bool(rng.random() < 0.05),
                gain=float(np.exp(rng.normal(0, 0.08))), bias=float(rng.normal(0, 0.03)),
                sat=float(np.exp(rng.normal(0, 0.1))))


def render_clip(levels, m, size, n_frames, device):
    """Render one clip [3, T, size, size] in [-1, 1] from an image pyramid and motion m."""
    lvl = int(np.clip(np.floor(2 * np.log2(max(m["scale"], 1.0))), 0, len(levels) - 1))
    img = levels[lvl]
    r = m["scale"] / 2 ** (lvl / 2)  # residual scale at that level
    _, H, W = img.shape
    # Shrink the scale if the window (with zoom-out and rotation margins) does not fit.
    zmin = min(1.0, m["zoom"])
    need = size * r / zmin * (1 + 2 * abs(m["rot"])) + 4
    if need > min(H, W):
        r *= (min(H, W) - 4) / need
    half = size * r / zmin * (1 + 2 * abs(m["rot"])) / 2 + 2
    # Start and end centres inside the valid range; displacement in level pixels.
    dx, dy = m["dx"] * r, m["dy"] * r
    lo_x, hi_x = half, W - half
    lo_y, hi_y = half, H - half
    dx = float(np.clip(dx, -(hi_x - lo_x), hi_x - lo_x))
    dy = float(np.clip(dy, -(hi_y - lo_y), hi_y - lo_y))
    x0 = lo_x + m["u0"] * (hi_x - lo_x - abs(dx)) + max(0.0, -dx)
    y0 = lo_y + m["v0"] * (hi_y - lo_y - abs(dy)) + max(0.0, -dy)
    t = torch.linspace(0, 1, n_frames, dtype=torch.float64)
    if m["ease"]:
        p = 0.5 - 0.5 * torch.cos(math.pi * t)
    else:
        a = max(-0.9, min(0.9, m["accel"]))
        p = (1 - a) * t + a * t * t  # constant acceleration, stays in [0, 1]
    cx, cy = x0 + dx * p, y0 + dy * p
    z = m["zoom"] ** p
    th = m["rot"] * p
    cos, sin = torch.cos(th), torch.sin(th)
    k = r / z
    # affine_grid theta: output normalised coords -> input normalised coords (align_corners=False)
    theta = torch.zeros(n_frames, 2, 3, dtype=torch.float64)
    theta[:, 0, 0] = k * cos * size / W
    theta[:, 0, 1] = -k * sin * size / W
    theta[:, 1, 0] = k * sin * size / H
    theta[:, 1, 1] = k * cos * size / H
    theta[:, 0, 2] = 2 * cx / W - 1
    theta[:, 1, 2] = 2 * cy / H - 1
    theta = theta.float().to(device)
    grid = F.affine_grid(theta, [n_frames, 3, size, size], align_corners=False)
    src = img.float().unsqueeze(0).expand(n_frames, -1, -1, -1)
    fr = F.grid_sample(src, grid, mode="bilinear", padding_mode="reflection", align_corners=False)
    fr = fr / 127.5 - 1.0                                   # [T, 3, S, S] in [-1, 1]
    if m["flip"]:
        fr = fr.flip(-1)
    if m["vflip"]:
        fr = fr.flip(-2)
    grey = fr.mean(dim=1, keepdim=True)
    fr = grey + (fr - grey) * m["sat"]
    fr = (fr * m["gain"] + m["bias"]).clamp(-1, 1)
    return fr.permute(1, 0, 2, 3)                           # [3, T, S, S]


def make_batch(bank, rng, size, batch, n_frames, device, fast_pan_prob=0.0):
    clips = []
    for _ in range(batch):
        if bank.probs is None:
            i = int(rng.integers(len(bank.images)))
        else:
            i = int(rng.choice(len(bank.images), p=bank.probs))
        m = sample_motion(rng, size, n_frames, fast_pan_prob)
        clips.append(render_clip(bank.images[i], m, size, n_frames, device))
    return torch.stack(clips)


# --------------------------------------------------------------------------------------------
# Model helpers
# --------------------------------------------------------------------------------------------

def init_weights(model: VideoVAE):
    """Start the residual branches near identity: the second conv of every resnet and the
    attention output projection at 0; the depth-to-space 1x1 convs as nearest-neighbour copies."""
    for name, mod in model.named_modules():
        if name.endswith(".conv2") or name.endswith("to_out.0"):
            nn.init.zeros_(mod.weight)
            nn.init.zeros_(mod.bias)
        if name.endswith("upscale_conv"):
            cout, cin = mod.weight.shape[:2]
            w = torch.zeros(cout, cin)
            w[torch.arange(cout), torch.arange(cout) % cin] = 1.0
            with torch.no_grad():
                mod.weight.copy_(w.view(cout, cin, 1, 1, 1) + 0.02 * torch.randn(cout, cin, 1, 1, 1))
                mod.bias.zero_()


def psnr_batch(x, y):
    """Mean PSNR (dB) over clips, frames in [-1, 1] clamped, peak 1 on the [0, 1] scale."""
    a = (x.float().clamp(-1, 1) + 1) / 2
    b = (y.float().clamp(-1, 1) + 1) / 2
    mse = (a - b).pow(2).flatten(1).mean(1).clamp_min(1e-10)
    return (10 * torch.log10(1.0 / mse)).mean().item()


@torch.no_grad()
def evaluate(model, val_clips, amp_dtype, device):
    model.eval()
    ps = []
    for x in val_clips:
        with torch.autocast(device.type, dtype=amp_dtype, enabled=amp_dtype is not None):
            y = model(x)
        ps.append(psnr_batch(y, x))
    model.train()
    return float(np.mean(ps))


def state_fp32(model):
    return {k: v.detach().float().cpu().contiguous() for k, v in model.state_dict().items()}


def write_weights(path, sd, meta, shard=False):
    """fp16 single file, or (shard=True) fp32 shards of <= 15 MiB named FILE-fp32-0000k-of-0000n."""
    if not shard:
        st.save(path, {k: v.half() for k, v in sd.items()}, meta)
        return [path]
    base = path[:-len(".safetensors")] if path.endswith(".safetensors") else path
    groups, cur, size = [], {}, 0
    for k in sorted(sd):
        nb = sd[k].numel() * 4
        if cur and size + nb > SHARD_BYTES - 65536:
            groups.append(cur)
            cur, size = {}, 0
        cur[k] = sd[k]
        size += nb
    groups.append(cur)
    for f in glob.glob(base + "-fp32-*-of-*.safetensors"):
        os.remove(f)
    paths = []
    for i, g in enumerate(groups):
        p = f"{base}-fp32-{i + 1:05d}-of-{len(groups):05d}.safetensors"
        st.save(p, g, meta)
        paths.append(p)
    return paths


def load_init(path):
    """Weights from an fp16 export, one fp32 shard path (all shards are read) or a glob."""
    files = sorted(glob.glob(path))
    if len(files) == 1 and "-fp32-" in files[0]:
        files = sorted(glob.glob(files[0].split("-fp32-")[0] + "-fp32-*-of-*.safetensors"))
    sd, meta = {}, {}
    for f in files:
        t, m = st.load(f)
        sd.update({k: v.float() for k, v in t.items()})
        meta = m
    if not sd:
        raise SystemExit(f"--init {path}: no weights found")
    return sd, meta


# --------------------------------------------------------------------------------------------
# Main
# --------------------------------------------------------------------------------------------

def average_gradients(params, world):
    """Average the gradients over the processes: one all-reduce of one flat buffer per step
    (9.85 M fp32 values, ~40 MB: under a millisecond on NVLink against a step of ~0.3 s).
    Written out rather than wrapping the model in DistributedDataParallel because training calls
    the two torch.compile'd halves (encoder, decoder) directly, outside the module's forward
    that DDP hooks, and overlapping the reduction with the backward would gain nothing here."""
    grads = [p.grad for p in params if p.grad is not None]  # the same set in every process
    flat = torch.cat([g.reshape(-1) for g in grads])
    dist.all_reduce(flat)
    flat /= world
    off = 0
    for g in grads:
        g.copy_(flat[off:off + g.numel()].view_as(g))
        off += g.numel()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", required=True, help="data pack directory (index.json, images/)")
    ap.add_argument("--ckpt", required=True, help="checkpoint directory (resumed if it has state.pt)")
    ap.add_argument("--minutes", type=float, required=True, help="wall-clock budget of this call (whole script)")
    ap.add_argument("--out", required=True, help="fp16 safetensors written at the end")
    ap.add_argument("--log", default=None, help="JSONL log (default: <ckpt>/log.jsonl); appended")
    ap.add_argument("--init", default=None, help="warm start from exported weights if --ckpt is empty")
    ap.add_argument("--channels", default="32,64,80,80")
    ap.add_argument("--groups", type=int, default=8)
    ap.add_argument("--batch", type=float, default=4, help="clips per step at 256x256 (scaled by area)")
    ap.add_argument("--sizes", default="128,192,256", help="crop sizes (multiples of 8)")
    ap.add_argument("--size-weights", default="0.3,0.4,0.3")
    ap.add_argument("--frames", type=int, default=17)
    ap.add_argument("--fast-pan-prob", type=float, default=0.3,
                    help="probability that a training clip is a fast pan, speed uniform in "
                         "[4, 12] output px per frame (validation clips never are)")
    ap.add_argument("--detail-mix", type=float, default=0.0,
                    help="share of clips drawn in proportion to the still's fine detail "
                         "(StillBank.set_detail_sampling); 0: every still equally often")
    ap.add_argument("--detail-power", type=float, default=1.0,
                    help="exponent on the fine-detail RMS for --detail-mix")
    ap.add_argument("--lr", type=float, default=3e-4)
    ap.add_argument("--min-lr-frac", type=float, default=0.05)
    ap.add_argument("--warmup", type=int, default=200)
    ap.add_argument("--total-minutes", type=float, default=16.0,
                    help="planned training time over all calls; the LR follows a cosine over it")
    ap.add_argument("--restart-schedule", action="store_true",
                    help="with --init: a new warm-up and cosine over --total-minutes from now, "
                         "instead of continuing the schedule of the initial weights")
    ap.add_argument("--kl", type=float, default=1e-6)
    ap.add_argument("--mse", type=float, default=1.0, help="weight of the MSE term (L1 weight 1)")
    ap.add_argument("--sample-prob", type=float, default=0.0, help="fraction of steps decoding a sample")
    ap.add_argument("--ema", type=float, default=0.998)
    ap.add_argument("--clip-grad", type=float, default=1.0)
    ap.add_argument("--val-every", type=int, default=250)
    ap.add_argument("--val-clips", type=int, default=8)
    ap.add_argument("--val-size", type=int, default=256)
    ap.add_argument("--log-every", type=int, default=25)
    ap.add_argument("--ckpt-every-min", type=float, default=3.0)
    ap.add_argument("--reserve-s", type=float, default=25.0, help="seconds kept for checkpoint/export")
    ap.add_argument("--max-steps", type=int, default=0, help="stop after this many steps in total (0: none)")
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--amp", default=None, choices=["bf16", "fp16", "none"],
                    help="autocast dtype (default: bf16 on CUDA, none on CPU)")
    ap.add_argument("--compile", action="store_true", help="torch.compile the model (costs minutes)")
    ap.add_argument("--threads", type=int, default=0)
    args = ap.parse_args()

    deadline = T_START + args.minutes * 60 - args.reserve_s
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    # One process, or one per GPU under torchrun (module docstring).
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    main_proc = rank == 0
    if world > 1:
        if device.type == "cuda":
            device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
            torch.cuda.set_device(device)
        dist.init_process_group("nccl" if device.type == "cuda" else "gloo")
    args.processes = world
    say = print if main_proc else (lambda *a, **k: None)
    if device.type == "cuda":
        torch.backends.cudnn.benchmark = True
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    if args.amp is None:
        args.amp = "bf16" if device.type == "cuda" else "none"
    amp_dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "none": None}[args.amp]
    if device.type == "cpu" and amp_dtype is torch.float16:
        amp_dtype = None
    channels = [int(c) for c in args.channels.split(",")]
    sizes = [int(s) for s in args.sizes.split(",")]
    size_w = np.array([float(w) for w in args.size_weights.split(",")])
    size_w /= size_w.sum()
    os.makedirs(args.ckpt, exist_ok=True)
    log_path = args.log or os.path.join(args.ckpt, "log.jsonl")
    os.makedirs(os.path.dirname(os.path.abspath(log_path)), exist_ok=True)
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)

    def log(rec):
        if not main_proc:
            return
        rec = dict(rec, time=round(time.time() - T_START, 1))
        with open(log_path, "a") as f:
            f.write(json.dumps(rec) + "\n")

    # ---- model, EMA, optimizer ------------------------------------------------------------
    torch.manual_seed(args.seed)
    model = VideoVAE(channels, args.groups).to(device)
    init_weights(model)
    ema = VideoVAE(channels, args.groups).to(device)
    ema.load_state_dict(model.state_dict())
    ema.requires_grad_(False)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, betas=(0.9, 0.99), weight_decay=0.0)
    n_params = parameter_count(model)
    say(f"model {channels} groups {args.groups}: {n_params:,} parameters "
        f"({2 * n_params / 2**20:.2f} MiB fp16), device {device}, amp {args.amp}, "
        f"{world} process{'es' if world > 1 else ''}", flush=True)

    step, train_s, history, warm_from = 0, 0.0, [], 0
    sched_from = 0.0  # training seconds at which the LR schedule (cosine) started
    # Where the weights came from before this run (widen.py's demo.widened_from), carried from
    # --init through the checkpoint into every export.
    lineage = {}
    rng = np.random.default_rng(args.seed)
    state_path = os.path.join(args.ckpt, "state.pt")
    if os.path.exists(state_path):
        try:
            ck = torch.load(state_path, map_location=device, weights_only=False)
        except TypeError:  # very old torch without weights_only
            ck = torch.load(state_path, map_location=device)
        if ck["config"]["channels"] != channels or ck["config"]["groups"] != args.groups:
            raise SystemExit(f"checkpoint {state_path} has configuration {ck['config']}")
        model.load_state_dict(ck["model"])
        ema.load_state_dict(ck["ema"])
        opt.load_state_dict(ck["opt"])
        step, train_s, history = ck["step"], ck["train_s"], ck["history"]
        warm_from = ck.get("warm_from", 0)
        lineage = ck.get("lineage", {})
        sched_from = ck.get("sched_from", 0.0)
        rng.bit_generator.state = ck["np_rng"]
        random.setstate(ck["py_rng"])
        torch.set_rng_state(ck["torch_rng"].cpu())
        if device.type == "cuda" and ck.get("cuda_rng") is not None:
            torch.cuda.set_rng_state(ck["cuda_rng"].cpu())
        say(f"resumed {state_path}: step {step}, {train_s / 60:.1f} min trained", flush=True)
        log({"event": "resume", "step": step, "from": state_path})
    elif args.init:
        sd, meta = load_init(args.init)
        model.load_state_dict(sd)
        ema.load_state_dict(sd)
        step = int(meta.get("demo.steps", 0))
        train_s = float(meta.get("demo.train_seconds", 0.0))
        warm_from = step  # restart the warm-up for the fresh optimizer
        lineage = {k: v for k, v in meta.items() if k in LINEAGE_KEYS}
        if args.restart_schedule:
            sched_from = train_s
        rng = np.random.default_rng(args.seed + step)
        say(f"warm start from {args.init}: step {step}, {train_s / 60:.1f} min trained "
            f"(fresh optimizer)", flush=True)
        log({"event": "init", "step": step, "from": args.init})
    else:
        log({"event": "start", "config": vars(args), "params": n_params})

    if world > 1:  # the same start everywhere, whatever the seeds did
        for t in list(model.state_dict().values()) + list(ema.state_dict().values()):
            dist.broadcast(t, 0)
    # One process draws the clips from rng, as it always did. Several draw them from a generator
    # of their rank each; rng, identical in every process, still draws the crop size (so all
    # compile and run the same shapes) and everything else the schedule needs.
    data_rng = rng if world == 1 else np.random.default_rng([args.seed, step, rank])

    # ---- data --------------------------------------------------------------------------------
    t0 = time.time()
    bank = StillBank(args.data, "train", device)
    if args.detail_mix > 0:
        bank.set_detail_sampling(args.detail_mix, args.detail_power)
        top = np.sort(bank.probs)[::-1][: max(1, len(bank.probs) // 10)].sum()
        say(f"detail sampling: mix {args.detail_mix}, power {args.detail_power}; the 10 % most "
            f"detailed stills get {100 * top:.0f} % of the clips", flush=True)
    try:
        vbank = StillBank(args.data, "val", device)
    except SystemExit:
        vbank = bank
    vrng = np.random.default_rng(987654)  # fixed validation clips, same in every call
    val_clips = [make_batch(vbank, vrng, args.val_size, 1, args.frames, device)
                 for _ in range(args.val_clips)]
    say(f"data: {len(bank.images)} train stills, {len(vbank.images)} val stills, "
        f"{len(val_clips)} val clips {args.val_size}x{args.val_size}x{args.frames} "
        f"({time.time() - t0:.1f} s)", flush=True)

    # torch.compile of the two halves, kept outside the module tree so that state_dict() keys
    # stay the checkpoint's names.
    # dynamic=False: one specialised graph per crop size (compiled on its first step); if the
    # compiler fails on this machine, training falls back to eager mode (see the loop).
    compiled = bool(args.compile)
    enc_fn = torch.compile(model.encoder, dynamic=False) if compiled else model.encoder
    dec_fn = torch.compile(model.decoder, dynamic=False) if compiled else model.decoder
    compiled_sizes = set()

    def mem_gib():
        return torch.cuda.max_memory_allocated() / 2**30 if device.type == "cuda" else 0.0

    def lr_at(step_, train_s_):
        w = min(1.0, (step_ - warm_from + 1) / max(1, args.warmup))
        frac = min(1.0, max(0.0, train_s_ - sched_from) / (args.total_minutes * 60))
        cos = args.min_lr_frac + (1 - args.min_lr_frac) * 0.5 * (1 + math.cos(math.pi * frac))
        return args.lr * w * cos

    def save_ckpt():
        ck = {"model": model.state_dict(), "ema": ema.state_dict(), "opt": opt.state_dict(),
              "step": step, "train_s": train_s, "history": history, "warm_from": warm_from,
              "sched_from": sched_from, "lineage": lineage,
              "np_rng": rng.bit_generator.state, "py_rng": random.getstate(),
              "torch_rng": torch.get_rng_state(),
              "cuda_rng": torch.cuda.get_rng_state() if device.type == "cuda" else None,
              "config": {"channels": channels, "groups": args.groups}}
        tmp = state_path + ".tmp"
        torch.save(ck, tmp)
        os.replace(tmp, state_path)

    # ---- training loop -------------------------------------------------------------------------
    def train_step(x):
        """One optimisation step on clip batch x; returns the loss terms (device tensors)."""
        with torch.autocast(device.type, dtype=amp_dtype, enabled=amp_dtype is not None):
            moments = enc_fn(x)
            mean, logvar = moments[:, :16], moments[:, 16:].clamp(-30.0, 20.0)
            z = mean
            if args.sample_prob > 0 and rng.random() < args.sample_prob:
                z = mean + torch.exp(0.5 * logvar) * torch.randn_like(mean)
            y = dec_fn(z)
        y = y.float()
        mean, logvar = mean.float(), logvar.float()
        l1 = (y - x).abs().mean()
        mse = (y - x).pow(2).mean()
        kl = 0.5 * (mean.pow(2) + logvar.exp() - 1.0 - logvar).sum() / x.numel()
        loss = l1 + args.mse * mse + args.kl * kl
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if world > 1:
            average_gradients(params, world)
        if args.clip_grad > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip_grad)
        opt.step()
        return loss, l1, mse, kl

    params = list(model.parameters())
    model.train()
    acc = {"loss": 0.0, "l1": 0.0, "mse": 0.0, "kl": 0.0, "n": 0, "px": 0}
    t_log = time.time()
    t_ckpt = time.time()
    step_time = None
    last_val = None
    started_at_step = step
    pending_dt = 0.0  # the last step's time, counted once the processes agree on it
    while True:
        stop = bool(args.max_steps and step >= args.max_steps) or \
            time.time() + 1.5 * (step_time or 0.0) + 5 > deadline
        if world > 1:
            # One tiny collective a step: stop when any process must, and count the slowest
            # process's step time, so the LR (a function of training time) stays the same in all.
            ctl = torch.tensor([float(stop), pending_dt], dtype=torch.float64, device=device)
            dist.all_reduce(ctl, op=dist.ReduceOp.MAX)
            stop, pending_dt = bool(ctl[0] > 0), float(ctl[1])
        if pending_dt > 0:
            train_s += pending_dt
            step_time = pending_dt if step_time is None else 0.9 * step_time + 0.1 * pending_dt
            pending_dt = 0.0
        if stop:
            break
        ts = time.time()
        size = int(rng.choice(sizes, p=size_w))
        batch = max(1, int(round(args.batch * (256 / size) ** 2)))
        x = make_batch(bank, data_rng, size, batch, args.frames, device, args.fast_pan_prob)
        lr = lr_at(step, train_s)
        for g in opt.param_groups:
            g["lr"] = lr
        first_of_shape = compiled and (size, batch) not in compiled_sizes
        try:
            loss, l1, mse, kl = train_step(x)
        except Exception as e:  # noqa: BLE001 - compiler failure or CUDA out of memory
            if world > 1:
                # A process that recovered alone would leave the others waiting in a different
                # collective; torchrun stops them all instead.
                raise
            if compiled and "out of memory" not in str(e):
                say(f"torch.compile failed ({type(e).__name__}: {str(e)[:300]}); "
                    f"continuing in eager mode", flush=True)
                log({"event": "compile_failed", "step": step, "error": str(e)[:1000]})
                compiled = False
                enc_fn, dec_fn = model.encoder, model.decoder
                opt.zero_grad(set_to_none=True)
                continue
            if "out of memory" not in str(e):
                raise
            opt.zero_grad(set_to_none=True)
            x = None
            if device.type == "cuda":
                torch.cuda.empty_cache()
            args.batch *= 0.7
            say(f"out of memory at size {size} batch {batch}: batch scale now {args.batch:.2f}", flush=True)
            log({"event": "oom", "step": step, "size": size, "batch": batch})
            continue
        with torch.no_grad():
            d = min(args.ema, (1 + step - warm_from) / (10 + step - warm_from))
            for pe, pm in zip(ema.parameters(), model.parameters()):
                pe.mul_(d).add_(pm.detach(), alpha=1 - d)
        step += 1
        if device.type == "cuda" and step % args.log_every == 0:
            torch.cuda.synchronize()
        dt = time.time() - ts
        if first_of_shape:
            # The compile time of a new shape is neither training time (LR schedule) nor a
            # step time estimate for the deadline.
            compiled_sizes.add((size, batch))
            say(f"compiled for {size}px x{batch} in {dt:.0f} s", flush=True)
            log({"event": "compiled", "step": step, "size": size, "batch": batch, "seconds": dt})
            t_log = time.time()
        else:
            pending_dt = dt
        with torch.no_grad():  # accumulate on the device; synchronise only when logging
            for k, v in (("loss", loss), ("l1", l1), ("mse", mse), ("kl", kl)):
                acc[k] = acc[k] + v.detach()
        acc["n"] += 1
        acc["px"] += x.numel() // 3 * world
        if step % args.log_every == 0:
            el = time.time() - t_log
            avg = {k: float(acc[k]) / max(1, acc["n"]) for k in ("loss", "l1", "mse", "kl")}
            rec = {"step": step, "loss": avg["loss"], "l1": avg["l1"], "mse": avg["mse"],
                   "kl": avg["kl"], "lr": lr, "size": size, "batch": batch,
                   "train_psnr": 10 * math.log10(4.0 / max(avg["mse"], 1e-10)),
                   "mpx_per_s": acc["px"] / el / 1e6, "train_min": train_s / 60,
                   "processes": world}
            history.append(rec)
            log(rec)
            say(f"step {step:6d}  loss {rec['loss']:.4f}  l1 {rec['l1']:.4f}  "
                f"psnr(train) {rec['train_psnr']:.2f}  kl {rec['kl']:.3g}  lr {lr:.2e}  "
                f"{rec['mpx_per_s']:.2f} Mpx/s  {size}px x{batch}  {mem_gib():.1f} GiB  "
                f"[{time.time() - T_START:.0f}s]", flush=True)
            acc = {"loss": 0.0, "l1": 0.0, "mse": 0.0, "kl": 0.0, "n": 0, "px": 0}
            t_log = time.time()
        if main_proc and step % args.val_every == 0:
            last_val = evaluate(ema, val_clips, amp_dtype, device)
            log({"step": step, "val_psnr_ema": last_val})
            say(f"step {step:6d}  val PSNR (EMA) {last_val:.2f} dB", flush=True)
        if main_proc and time.time() - t_ckpt > args.ckpt_every_min * 60:
            save_ckpt()
            t_ckpt = time.time()

    # ---- end: checkpoint, final evaluation, export (rank 0) ------------------------------------
    if world > 1:
        # The weights must have stayed identical in every process (same averaged gradients,
        # same LR); a checksum's spread across the processes says whether they did.
        cs = torch.stack([p.detach().double().sum() for p in params]).sum()
        spread = torch.stack([cs, -cs])
        dist.all_reduce(spread, op=dist.ReduceOp.MAX)
        if float(spread[0] + spread[1]) != 0.0:
            raise SystemExit(f"rank {rank}: the weights differ across the processes "
                             f"(checksum spread {float(spread[0] + spread[1]):.3g})")
        dist.destroy_process_group()
    if not main_proc:
        return 0
    save_ckpt()
    val_ema = evaluate(ema, val_clips, amp_dtype, device)
    val_raw = evaluate(model, val_clips, amp_dtype, device)
    pick = ema if val_ema >= val_raw else model
    last = history[-1] if history else {}
    say(f"done: step {step} ({step - started_at_step} this call), {train_s / 60:.1f} min trained, "
        f"val PSNR EMA {val_ema:.2f} dB, raw {val_raw:.2f} dB -> exporting "
        f"{'EMA' if pick is ema else 'raw'} weights", flush=True)
    meta = {k: v for k, v in model_meta(channels, args.groups).items()}
    meta.update({
        "demo.format": "SeedVR2 VideoAutoencoderKL state dict (docs/model.md §3 names)",
        "demo.trainer": "tools/demo_model/train.py",
        "demo.date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "demo.steps": str(step),
        "demo.train_seconds": f"{train_s:.1f}",
        "demo.weights": "ema" if pick is ema else "raw",
        "demo.parameters": str(n_params),
        "demo.final_losses": json.dumps({k: last.get(k) for k in ("loss", "l1", "mse", "kl")}),
        "demo.val_psnr_db": f"{max(val_ema, val_raw):.3f}",
        "demo.val_set": f"{args.val_clips} clips {args.val_size}x{args.val_size}x{args.frames} "
                        f"synthesised (seed 987654) from the pack's val stills",
        "demo.training": json.dumps({k: getattr(args, k) for k in (
            "batch", "sizes", "size_weights", "frames", "fast_pan_prob", "detail_mix",
            "detail_power", "lr", "min_lr_frac", "warmup", "total_minutes", "kl", "mse",
            "sample_prob", "ema", "clip_grad", "seed", "amp", "processes")}),
        "demo.data_packages": json.dumps(bank.index.get("packages", {})),
        "demo.data_images": str(len(bank.images)),
        "demo.data_note": "stills from Debian packages (see packages/licences); camera motion "
                          "synthesised; held-out evaluation sources never in the pack",
        "demo.torch": torch.__version__,
    })
    meta.update(lineage)
    sd = state_fp32(pick)
    write_weights(args.out, sd, meta)
    shards = write_weights(args.out, sd, meta, shard=True)
    log({"event": "export", "step": step, "val_psnr_ema": val_ema, "val_psnr_raw": val_raw,
         "out": args.out, "shards": shards})
    say(f"wrote {args.out} ({os.path.getsize(args.out) / 2**20:.2f} MiB) and "
        f"{len(shards)} fp32 shards; total {time.time() - T_START:.0f} s", flush=True)
    return 0


def model_meta(channels, groups):
    """The engine's configuration keys (core/vae/vae_config.cpp to_metadata)."""
    return {"seedvae.block_out_channels": ",".join(str(c) for c in channels),
            "seedvae.latent_channels": "16", "seedvae.layers_per_block": "2",
            "seedvae.temporal_scale_num": "2", "seedvae.norm_groups": str(groups)}


if __name__ == "__main__":
    sys.exit(main())
