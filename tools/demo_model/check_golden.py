#!/usr/bin/env python3
"""Prove that vae.py is the SeedVR2 VAE: run the tiny reference configuration (channels
[16, 32, 64, 64], 8 GroupNorm groups) with the reference weights on the reference inputs in float32
and compare with the upstream float32 outputs of ../shared/golden/tiny (README section 4).

Checked: V17/V5/I1 enc_moments, V17/V5/I1 dec_of_mean (decoder applied to the golden enc_mean,
so the decoder is measured alone), L5/L2 .dec; also the block intermediates of V17 when present.
Tolerance (golden README section 8): max abs <= 1e-4 and rms <= 1e-5 for fp32 outputs.

Usage: python3 tools/demo_model/check_golden.py [--golden ../shared/golden/tiny]
Exit status 0 when every tensor is within tolerance.
"""

import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_io as st  # noqa: E402
from vae import VideoVAE  # noqa: E402


def compare(name, got, ref, bound, rel=False):
    d = (got.double() - ref.double()).abs()
    mx, rms = d.max().item(), d.pow(2).mean().sqrt().item()
    lim = bound * max(1.0, ref.abs().max().item()) if rel else bound
    ok = mx <= lim and (rel or rms <= 1e-5)
    print(f"  {name:40s} {str(list(got.shape)):22s} max_abs {mx:.3e}  rms {rms:.3e}  "
          f"{'ok' if ok else 'FAIL'}")
    return ok


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--golden", default=os.path.normpath(os.path.join(here, "../../../shared/golden/tiny")))
    ap.add_argument("--tolerance", type=float, default=1e-4)
    ap.add_argument("--threads", type=int, default=0)
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False

    weights, _ = st.load(os.path.join(args.golden, "weights_fp16.safetensors"))
    inputs, _ = st.load(os.path.join(args.golden, "inputs.safetensors"))
    golden, _ = st.load(os.path.join(args.golden, "golden_fp32.safetensors"))

    model = VideoVAE([16, 32, 64, 64], norm_groups=8).eval()
    own = model.state_dict()
    missing = sorted(set(own) - set(weights))
    extra = sorted(set(weights) - set(own))
    shape_bad = [k for k in own if k in weights and tuple(own[k].shape) != tuple(weights[k].shape)]
    print(f"state dict: model {len(own)} tensors, file {len(weights)} tensors, "
          f"missing {missing}, unexpected {extra}, misshaped {shape_bad}")
    if missing or extra or shape_bad:
        return 1
    model.load_state_dict({k: v.float() for k, v in weights.items()})

    ok = True
    print("float32 vs golden_fp32:")
    with torch.no_grad():
        for case in ("V17", "V5", "I1"):
            moments = model.encode_moments(inputs[case].float())
            ok &= compare(f"{case}.enc_moments", moments, golden[f"{case}.enc_moments"], args.tolerance)
            dec = model.decode(golden[f"{case}.enc_mean"].float())
            ok &= compare(f"{case}.dec_of_mean", dec, golden[f"{case}.dec_of_mean"], args.tolerance)
        for case in ("L5", "L2"):
            dec = model.decode(inputs[case].float())
            ok &= compare(f"{case}.dec", dec, golden[f"{case}.dec"], args.tolerance)

        inter_path = os.path.join(args.golden, "intermediates_fp32.safetensors")
        if os.path.exists(inter_path):
            inter, _ = st.load(inter_path)
            print("V17 block intermediates (relative bound 1e-4 * max(1, max|ref|)):")
            acts = {}
            hooks = []
            for name, mod in model.named_modules():
                key = f"V17.inter.{name}"
                if key in inter:
                    hooks.append(mod.register_forward_hook(
                        lambda m, i, o, key=key: acts.__setitem__(key, o)))
            model.decode(model.encode(inputs["V17"].float())[0])
            for h in hooks:
                h.remove()
            for key in sorted(inter):
                if key in acts:
                    ok &= compare(key.replace("V17.inter.", ""), acts[key], inter[key],
                                  args.tolerance, rel=True)
                else:
                    print(f"  {key}: no matching module output")
    print("RESULT:", "PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
