#!/usr/bin/env python3
"""docs/images/demo-model-stills.png: frame 8 of each held-out clip, the original (left) and our
engine's reconstruction with the default demo model (right, `seedvae roundtrip --backend cpu`).

  /usr/bin/python3 tools/demo_model/stills.py [--seedvae build/app/seedvae] [--frame 8]
"""

import argparse
import glob
import os
import subprocess
import sys
import tempfile

from PIL import Image

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)
from eval_clips import find_seedvae  # noqa: E402

CLIPS = ("ladybird", "boats", "cat", "forest")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seedvae", default=None)
    ap.add_argument("--frame", type=int, default=8)
    ap.add_argument("--gap", type=int, default=8)
    ap.add_argument("--out", default=os.path.join(REPO, "docs", "images", "demo-model-stills.png"))
    args = ap.parse_args()
    exe = args.seedvae or find_seedvae()
    if not exe:
        sys.exit("seedvae not found: build it or pass --seedvae")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in CLIPS:
            clip = os.path.join(REPO, "resources", "demo", "clips", name)
            out = os.path.join(tmp, name) + "/"
            subprocess.run([exe, "roundtrip", clip, "--backend", "cpu", "-o", out, "-q"], check=True)
            frames = sorted(glob.glob(os.path.join(out, "*.png")))
            src = sorted(glob.glob(os.path.join(clip, "*.jpg")))
            rows.append((Image.open(src[args.frame]).convert("RGB"),
                         Image.open(frames[args.frame]).convert("RGB")))
    w, h = rows[0][0].size
    g = args.gap
    sheet = Image.new("RGB", (2 * w + g, len(rows) * h + (len(rows) - 1) * g), "white")
    for i, (a, b) in enumerate(rows):
        sheet.paste(a, (0, i * (h + g)))
        sheet.paste(b, (w + g, i * (h + g)))
    sheet.save(args.out, optimize=True)
    print("wrote", args.out)


if __name__ == "__main__":
    main()
