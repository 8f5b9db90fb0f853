#!/usr/bin/env python3
"""Build the training data pack and the held-out evaluation clips for the demo model.

Material: freely licensed stills from Debian 12 packages (no video material is packaged in Debian
that is both natural and freely licensed; camera motion is synthesised from stills):

  package                        licence (debian/copyright)        what
  mate-backgrounds               GPL-2+                            nature photos (nature/*), abstract art
  plasma-workspace-wallpapers    GPL-2+ (KDE Visual Design Group)  photos and illustrations
  ukui-wallpapers                CC-BY-SA-3.0                      illustrations and photos
  lomiri-wallpapers-20.04        CC-BY-SA-3.0                      photos and art
  gnome-backgrounds              CC-BY-SA-3.0                      illustrations / textures (webp)
  python3-skimage                CC0 / public domain (per image, skimage/data/_fetchers.py)
                                                                   photos: astronaut (NASA, PD),
                                                                   coffee, chelsea, camera, textures (CC0),
                                                                   rocket (SpaceX, PD), hubble (NASA, PD)
  lomiri-wallpapers              CC-BY-SA-3.0 (warty-final-ubuntu.png; the other file has no
                                 stated licence and is left out)
  Densely detailed photographs (few of the stills above are as detailed as the boats clip;
  docs/demo-model.md), chosen by hand:
  lomiri-wallpapers-16.04        CC-BY-4.0 (Aitzol Berasategi)     a creek, mountains
  stellarium-data                GPL-2+                            landscape panoramas (a flower
                                                                   field, snowy firs), grass,
                                                                   ground and stone-wall textures
  visp-images-data               GPL-2 (Inria; the subjects are    Klimt's "The Kiss", the 1927
                                 public domain)                    Solvay conference photograph

  More densely detailed photographs (buildings, animals in grass, rocks, crowds):
  gcompris-qt-data               GPL-3+ (debian/copyright, Files: photos of monuments, wild
                                 *); farm animals GPL-3 (Bruno    and farm animals, instruments;
                                 Coudoin and others). Upstream    inside Qt resource bundles
                                 credits the photos to Wikimedia  (.rcc), read by rcc_read()
                                 Commons authors (CC-BY, CC-BY-SA)
  scribus-template               public domain (Riku Leino)       a canyon
  hugin-data                     GPL-2+ (Pablo d'Angelo et al.)   an office block and lawn
  kphotoalbum                    GPL-2+ (Jesper K. Pedersen)      its demo photos
  tuxpaint-data                  GPL-2+ (Bill Kendrick)           a pebble beach, a cliff, sheep
  sddm-theme-maldives            CC-BY-3.0 (Nevit Dilmen)         a jetty, palms, a lagoon

  Photographs of water, shores and reflections (the boats clip's content: ripples, rocks,
  reflections at sunset) and a few more densely detailed ones:
  octave-vlfeat                  BSD-2-clause (Files: *, Andrea    a river canyon (two views),
                                 Vedaldi, Brian Fulkerson)         roofs (two views)
  libjs-jquery-backstretch       Expat (Files: *, Scott Robbin)    sea cliffs and a lighthouse,
                                                                   a glass dome, woven coasters
  krank                          public domain (images by Slava    coral reefs, fish (underwater)
                                 Anishenko)
  tagua-data                     GPL (per wallpaper: Dark_Waters   a beach at dusk, moonlight on
                                 Marcel Völschow, Dark_Sunset      a lake
                                 Michal Winiarski)
  golang-github-bep-gowebp-dev   Expat (Files: *, The gowebp       sunset ripples on the sea,
                                 Authors)                          rocks
  python-kivy-examples           Expat (Files: *)                  ruined arches (stonework)

(opencv-data was checked: Debian's package ships only cascade XML files, no sample images/videos.)

Install them (as root):   apt-get install -y mate-backgrounds plasma-workspace-wallpapers \
    ukui-wallpapers lomiri-wallpapers lomiri-wallpapers-20.04 lomiri-wallpapers-16.04 \
    gnome-backgrounds python3-skimage stellarium-data visp-images-data gcompris-qt-data \
    scribus-template hugin-data kphotoalbum tuxpaint-data sddm-theme-maldives octave-vlfeat \
    libjs-jquery-backstretch krank tagua-data golang-github-bep-gowebp-dev python-kivy-examples \
    python3-pil python3-opencv
or, without installing, extract them:  apt-get download <pkgs>; dpkg -x <pkg>.deb /tmp/pkgs/x_<pkg>
and pass  --roots /tmp/pkgs/x_*  (each root is searched like "/").
Several packages install into the same folders (usr/share/backgrounds), so a file is attributed
to a package only if that package owns it: on "/" as `dpkg-query -L` lists it, and a root named
x_<package> holds that package alone, so no file is taken twice under two packages' names.

Output:
  .demo-data/images/*.jpg     training/validation stills, <= 1024 px long side, JPEG quality 90
  .demo-data/index.json       [{file, package, licence, source, split: train|val}] + totals
  resources/demo/clips/<name>/NNN.jpg  held-out evaluation clips: 256x256, 17 frames as JPEG
                              files (quality 90; an image-sequence directory our reader accepts),
                              made from HELD-OUT stills that never enter the pack;
                              clips/README.md records sources, licences and motion.

Usage:  /usr/bin/python3 tools/demo_model/prepare_data.py [--roots /tmp/pkgs/x_*] [--max-mib 34]
"""

from __future__ import annotations

import argparse
import functools
import glob
import io
import json
import math
import os
import struct
import subprocess
import sys
import zlib

import numpy as np
from PIL import Image

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.normpath(os.path.join(HERE, "..", ".."))

# (package, licence, glob relative to a root, with the root standing for "/")
SOURCES = [
    ("mate-backgrounds", "GPL-2+", "usr/share/backgrounds/mate/nature/*.jpg"),
    ("mate-backgrounds", "GPL-2+", "usr/share/backgrounds/mate/abstract/*.png"),
    ("mate-backgrounds", "GPL-2+", "usr/share/backgrounds/mate/abstract/Elephants.jpg"),
    ("mate-backgrounds", "GPL-2+", "usr/share/backgrounds/mate/desktop/GreenTraditional.jpg"),
    ("mate-backgrounds", "GPL-2+", "usr/share/backgrounds/mate/desktop/Ubuntu-Mate-*-no-logo.png"),
    ("plasma-workspace-wallpapers", "GPL-2+", "usr/share/wallpapers/*/contents/images/*"),
    ("ukui-wallpapers", "CC-BY-SA-3.0", "usr/share/backgrounds/*.jpg"),
    ("ukui-wallpapers", "CC-BY-SA-3.0", "usr/share/backgrounds/*.png"),
    ("lomiri-wallpapers-20.04", "CC-BY-SA-3.0", "usr/share/backgrounds/*_by_*.jpg"),
    ("gnome-backgrounds", "CC-BY-SA-3.0", "usr/share/backgrounds/gnome/*.webp"),
    ("python3-skimage", "CC0-1.0 / public domain (skimage/data/_fetchers.py)",
     "usr/lib/python3/dist-packages/skimage/data/*.png"),
    ("python3-skimage", "CC0-1.0 / public domain (skimage/data/_fetchers.py)",
     "usr/lib/python3/dist-packages/skimage/data/*.jpg"),
    ("lomiri-wallpapers", "CC-BY-SA-3.0", "usr/share/backgrounds/warty-final-ubuntu.png"),
    # Densely detailed photographs.
    ("lomiri-wallpapers-16.04", "CC-BY-4.0 (Aitzol Berasategi)",
     "usr/share/backgrounds/life_by_Aitzol_Berasategi.jpg"),
    ("lomiri-wallpapers-16.04", "CC-BY-4.0 (Aitzol Berasategi)",
     "usr/share/backgrounds/picosdeeuropa_by_Aitzol_Berasategi.jpg"),
    ("stellarium-data", "GPL-2+", "usr/share/stellarium/landscapes/garching/garching-gl[13].png"),
    ("stellarium-data", "GPL-2+", "usr/share/stellarium/landscapes/garching/garching-ground3.png"),
    ("stellarium-data", "GPL-2+", "usr/share/stellarium/landscapes/guereins/guereinsb.png"),
    ("stellarium-data", "GPL-2+", "usr/share/stellarium/landscapes/hurricane/hurricane[12].png"),
    ("stellarium-data", "GPL-2+",
     "usr/share/stellarium/scenery3d/Testscene/TX_Stellarium-Testscene_withGrid/Stein_Mauerwerk_mehrfarbig.png"),
    ("stellarium-data", "GPL-2+",
     "usr/share/stellarium/scenery3d/Testscene/TX_Stellarium-Testscene/Stein_Platte_Quaderstein.jpg"),
    ("visp-images-data", "GPL-2 (Inria); the painting and the 1927 photograph are public domain",
     "usr/share/visp-images-data/ViSP-images/Klimt/Klimt.png"),
    ("visp-images-data", "GPL-2 (Inria); the painting and the 1927 photograph are public domain",
     "usr/share/visp-images-data/ViSP-images/Solvay/Solvay_conference_1927_Version2_2126x1463.png"),
    # Densely detailed photographs, chosen by hand (fine-detail RMS >= 8 as pack stills; boats
    # has 12.5, the pack's median still ~3.4).
    ("scribus-template", "public domain (Riku Leino)", "usr/share/scribus/templates/br2/nature.jpg"),
    ("hugin-data", "GPL-2+ (Pablo d'Angelo et al.)",
     "usr/share/hugin/xrc/data/help_en_EN/CA_tCA00.jpg"),
    ("kphotoalbum", "GPL-2+ (Jesper K. Pedersen et al.)", "usr/share/kphotoalbum/demo/bar55_2.jpg"),
    ("kphotoalbum", "GPL-2+ (Jesper K. Pedersen et al.)", "usr/share/kphotoalbum/demo/donna.jpg"),
    ("kphotoalbum", "GPL-2+ (Jesper K. Pedersen et al.)", "usr/share/kphotoalbum/demo/wayne.jpg"),
    ("kphotoalbum", "GPL-2+ (Jesper K. Pedersen et al.)", "usr/share/kphotoalbum/demo/snow.jpg"),
    ("kphotoalbum", "GPL-2+ (Jesper K. Pedersen et al.)", "usr/share/kphotoalbum/demo/bar55.jpg"),
    ("kphotoalbum", "GPL-2+ (Jesper K. Pedersen et al.)", "usr/share/kphotoalbum/demo/pool.jpg"),
    ("kphotoalbum", "GPL-2+ (Jesper K. Pedersen et al.)", "usr/share/kphotoalbum/demo/donna_2.jpg"),
    ("tuxpaint-data", "GPL-2+ (Bill Kendrick)", "usr/share/tuxpaint/templates/rocks.jpg"),
    ("tuxpaint-data", "GPL-2+ (Bill Kendrick)", "usr/share/tuxpaint/templates/cliff.jpg"),
    ("tuxpaint-data", "GPL-2+ (Bill Kendrick)", "usr/share/tuxpaint/templates/sheep.jpg"),
    ("tuxpaint-data", "GPL-2+ (Bill Kendrick)", "usr/share/tuxpaint/templates/redwoods_above.jpg"),
    ("sddm-theme-maldives", "CC-BY-3.0 (Nevit Dilmen)",
     "usr/share/sddm/themes/maldives/background.jpg"),
    # Water, shores and reflections (the boats clip's content), chosen by hand (fine-detail RMS
    # 6-20 as pack stills), and a few more densely detailed photographs.
    ("octave-vlfeat", "BSD-2-clause (Andrea Vedaldi, Brian Fulkerson)",
     "usr/share/octave/site/m/vlfeat/data/river[12].jpg"),
    ("octave-vlfeat", "BSD-2-clause (Andrea Vedaldi, Brian Fulkerson)",
     "usr/share/octave/site/m/vlfeat/data/roofs[12].jpg"),
    ("libjs-jquery-backstretch", "Expat (Scott Robbin)",
     "usr/share/doc/libjs-jquery-backstretch/examples/sample2_1920.jpg"),
    ("libjs-jquery-backstretch", "Expat (Scott Robbin)",
     "usr/share/doc/libjs-jquery-backstretch/examples/dome.jpg"),
    ("libjs-jquery-backstretch", "Expat (Scott Robbin)",
     "usr/share/doc/libjs-jquery-backstretch/examples/pot-holder.jpg"),
    ("krank", "public domain (images by Slava Anishenko)",
     "usr/share/games/krank/levels/unera-backgrounds/level-0[89].jpg"),
    ("krank", "public domain (images by Slava Anishenko)",
     "usr/share/games/krank/levels/unera-backgrounds/level-1[45].jpg"),
    ("krank", "public domain (images by Slava Anishenko)",
     "usr/share/games/krank/levels/unera-backgrounds/level-2[03].jpg"),
    ("tagua-data", "GPL (Marcel Völschow)", "usr/share/tagua/themes/wallpapers/Dark_Waters.jpg"),
    ("tagua-data", "GPL (Michal Winiarski)", "usr/share/tagua/themes/wallpapers/Dark_Sunset.jpg"),
    ("golang-github-bep-gowebp-dev", "Expat (The gowebp Authors)",
     "usr/share/gocode/src/github.com/bep/gowebp/test_data/images/sunset.jpg"),
    ("python-kivy-examples", "Expat (debian/copyright, Files: *)",
     "usr/share/kivy-examples/demo/pictures/images/Wall.jpg"),
]

# Photographs inside Qt resource bundles: (package, licence, bundle relative to a root, folder
# inside the bundle, file stems). gcompris-qt-data's debian/copyright gives GPL-3+ for Files: *
# and GPL-3 for the farm animals; upstream credits the photos to Wikimedia Commons authors
# (each activity's ActivityInfo.qml). Chosen by hand as above; kangaroo (GFDL) is left out.
_GC = "usr/share/gcompris-qt/rcc/"
_GCA = "/gcompris/src/activities/"
_GPL3P = "GPL-3+ (debian/copyright, Files: *; upstream: Wikimedia Commons photographs)"
RCC_SOURCES = [
    ("gcompris-qt-data", _GPL3P, _GC + "explore_monuments.rcc", _GCA + "explore_monuments/resource",
     ["india/ajantaCave", "germany/neuschwansteinCastle", "france/chateaudeChambord",
      "wonders/petra", "france/chateaudeChenonceau", "wonders/chichenItza",
      "germany/berlinCathedral", "france/citedeCarcassonne", "germany/schwerinPalace",
      "usa/mountRushmore", "egypt/greatPyramidOfGiza", "france/pontduGard", "wonders/colosseum",
      "india/hawaMahal", "usa/castillodeSanMarcos", "wonders/machuPicchu",
      "wonders/greatWallofChina", "germany/aulaPalatina", "germany/wormsCathedral",
      "france/eiffelTower", "france/arlesAmphitheater", "india/gatewayofIndia",
      "wonders/christTheRedeemer", "usa/georgeWashingtonBirthplace", "wonders/tajMahal",
      "france/palaisdesPapes", "germany/trierImperialBaths", "france/montStMichel",
      "india/qutubMinar", "usa/fortSumter", "india/charminar", "germany/brandenburgGate",
      "usa/navajo", "usa/canyondeChelly", "india/konarkSunTemple", "usa/lincolnMemorial"]),
    ("gcompris-qt-data", _GPL3P, _GC + "explore_world_animals.rcc",
     _GCA + "explore_world_animals/resource/animals",
     ["hedgehog", "giraffe", "bison", "chameleon", "dragon", "polar_bear", "lemur", "koala",
      "moose"]),
    ("gcompris-qt-data", "GPL-3 (debian/copyright: 2000, 2008 Bruno Coudoin and others)",
     _GC + "explore_farm_animals.rcc", _GCA + "explore_farm_animals/resource/animals",
     ["cow", "pig", "dog", "horse", "sheep", "chicken"]),
    ("gcompris-qt-data", _GPL3P, _GC + "erase.rcc", _GCA + "erase/resource",
     ["crab", "chamaeleon", "cheetah", "goat", "gorilla", "swans", "rhinoceros", "meerkats",
      "toucan", "penguin", "squirrel", "red_panda", "kingfisher"]),
    ("gcompris-qt-data", _GPL3P, _GC + "explore_world_music.rcc",
     _GCA + "explore_world_music/resource/music", ["orchestra", "america", "australia"]),
]

# skimage images that are photographs/textures with a stated free licence (the rest are
# synthetic test patterns, scans or have no stated licence in _fetchers.py).
SKIMAGE_OK = {"astronaut", "coffee", "chelsea", "camera", "rocket", "hubble_deep_field",
              "grass", "gravel", "brick", "retina", "cell", "moon", "coins", "page", "horse",
              "ihc", "text", "motorcycle_left"}
# GNOME files that are not useful (tiny or flat)
SKIP = {"vnc-d", "vnc-l", "symbolic-d", "symbolic-l", "motorcycle_right", "Arc-Colors-Transparent-Wallpaper"}

# Held-out sources: never written to the pack; the evaluation clips are made from them.
# name -> (package, licence, path suffix, motion)
HELD_OUT = {
    "ladybird": ("mate-backgrounds", "GPL-2+", "mate/nature/LadyBird.jpg",
                 dict(scale=1.9, pan=(60, 20), zoom=1.08, rot=0.0)),
    "boats": ("plasma-workspace-wallpapers", "GPL-2+", "wallpapers/EveningGlow/",
              dict(scale=2.4, pan=(-90, 8), zoom=1.0, rot=0.0)),
    "cat": ("python3-skimage", "CC0-1.0 (Stefan van der Walt)", "skimage/data/chelsea.png",
            dict(scale=1.05, pan=(30, -20), zoom=1.12, rot=0.0)),
    "forest": ("plasma-workspace-wallpapers", "GPL-2+", "wallpapers/Path/",
               dict(scale=3.0, pan=(12, -48), zoom=1.15, rot=0.02)),
}


_OWNED = {}


def owned_files(pkg):
    """The files the installed package owns (dpkg-query -L), or an empty set."""
    if pkg not in _OWNED:
        try:
            out = subprocess.run(["dpkg-query", "-L", pkg], capture_output=True, text=True)
            _OWNED[pkg] = set(out.stdout.split("\n")) if out.returncode == 0 else set()
        except OSError:
            _OWNED[pkg] = set()
    return _OWNED[pkg]


def root_holds(root, pkg, path):
    """Whether `path` (found under `root`) belongs to package `pkg`: on "/" the package must own
    it; a root named x_<package> (dpkg -x) holds that package only; any other root is trusted."""
    base = os.path.basename(os.path.normpath(root))
    if os.path.normpath(root) == "/":
        return path in owned_files(pkg)
    if base.startswith("x_"):
        return base[2:] == pkg
    return True


def find_sources(roots):
    """Yield (package, licence, path) for every candidate still, one file per plasma wallpaper
    (its largest image), skipping duplicates in several sizes."""
    seen = set()
    out = []
    for pkg, lic, pattern in SOURCES:
        for root in roots:
            files = sorted(f for f in glob.glob(os.path.join(root, pattern))
                           if root_holds(root, pkg, f))
            if "wallpapers/*/contents" in pattern:  # one image per plasma wallpaper: the largest
                best = {}
                for f in files:
                    key = f.split("/contents/")[0]
                    try:
                        w, h = Image.open(f).size
                    except Exception:
                        continue
                    if key not in best or w * h > best[key][0]:
                        best[key] = (w * h, f)
                files = [v[1] for v in best.values()]
            for f in files:
                stem = os.path.splitext(os.path.basename(f))[0]
                wall = f.split("/contents/")[0].rsplit("/", 1)[-1] if "/contents/" in f else stem
                if pkg == "python3-skimage" and stem not in SKIMAGE_OK:
                    continue
                if stem in SKIP or wall in SKIP:
                    continue
                key = (pkg, wall)
                if key in seen:
                    continue
                seen.add(key)
                out.append((pkg, lic, f, wall))
    return out


def rcc_read(bundle, inner):
    """The bytes of file `inner` ("/a/b/c.webp") inside a Qt resource bundle (.rcc), or None
    (not found, or not a readable bundle).

    Hand-written because no Debian Python package reads .rcc files (Qt's rcc tool only writes
    them). Format (qtbase src/corelib/io/qresource.cpp): "qres", then big-endian u32 version,
    tree, data and names offsets. Tree entries (14 bytes; 22 from version 2) are u32 name
    offset, u16 flags (1 zlib, 2 directory, 4 zstd), then for a directory u32 child count and
    u32 first child, for a file u16 country, u16 language and u32 data offset. A name is u16
    length, u32 hash, UTF-16BE text; data is u32 length then the bytes (zlib data begins with
    its u32 uncompressed size)."""
    try:
        return _rcc_lookup(_bundle_bytes(bundle), inner)
    except (OSError, struct.error, UnicodeDecodeError, zlib.error):
        return None


@functools.lru_cache(maxsize=None)
def _bundle_bytes(bundle):
    """A bundle's bytes, read once: find_rcc_sources and load_rgb both look into each bundle
    for every photo (the five used bundles are 13 MB in all)."""
    with open(bundle, "rb") as f:
        return f.read()


def _rcc_lookup(b, inner):
    if b[:4] != b"qres" or len(b) < 20:
        return None
    ver, tree, data, names = struct.unpack(">IIII", b[4:20])
    esz = 14 if ver == 1 else 22

    def entry(i):
        e = tree + i * esz
        noff, flags = struct.unpack(">IH", b[e:e + 6])
        n, = struct.unpack(">H", b[names + noff:names + noff + 2])
        name = b[names + noff + 6:names + noff + 6 + 2 * n].decode("utf-16-be")
        return e, name, flags

    i = 0
    for part in [p for p in inner.split("/") if p]:
        e, _, flags = entry(i)
        if not flags & 2:
            return None
        count, first = struct.unpack(">II", b[e + 6:e + 14])
        i = next((c for c in range(first, first + count) if entry(c)[1] == part), None)
        if i is None:
            return None
    e, _, flags = entry(i)
    if flags & 2 or flags & 4:  # a directory, or zstd (not used by Debian 12's gcompris)
        return None
    doff, = struct.unpack(">I", b[e + 10:e + 14])
    n, = struct.unpack(">I", b[data + doff:data + doff + 4])
    blob = b[data + doff + 4:data + doff + 4 + n]
    return zlib.decompress(blob[4:]) if flags & 1 else blob


def find_rcc_sources(roots):
    """(package, licence, "BUNDLE::INNER", name) for every RCC_SOURCES photo found."""
    out = []
    for pkg, lic, bundle, folder, stems in RCC_SOURCES:
        for root in roots:
            path = os.path.join(root, bundle)
            if not os.path.isfile(path) or not root_holds(root, pkg, path):
                continue
            for stem in stems:
                inner = f"{folder}/{stem}.webp"
                if rcc_read(path, inner) is not None:
                    out.append((pkg, lic, f"{path}::{inner}",
                                f"{os.path.basename(bundle)[:-4]}-{stem.rsplit('/', 1)[-1]}"))
            break  # one root per bundle
    return out


def package_path(path, roots):
    """Where the file is installed: its path under the most specific root that holds it (every
    path also lies under "/", which must not win, or the pack would record /tmp/pkgs/x_<pkg>/...
    paths)."""
    root = max((r for r in roots if path.startswith(os.path.join(r, ""))), key=len)
    return "/" + os.path.relpath(path, root)


def is_held_out(path):
    return any(v[2] in path for v in HELD_OUT.values())


def opaque_crop(im):
    """An RGBA image cropped to its fully opaque band: the rows that are opaque from edge to edge
    (a landscape panorama's ground under its transparent sky), then the opaque columns of that
    band. Unchanged if nothing or everything is transparent."""
    a = np.asarray(im)[..., 3] == 255
    rows = np.where(a.all(axis=1))[0]
    if len(rows) == 0 or len(rows) == a.shape[0]:
        return im
    band = a[rows.min():rows.max() + 1]
    cols = np.where(band.all(axis=0))[0]
    if len(cols) == 0:
        return im
    return im.crop((int(cols.min()), int(rows.min()), int(cols.max()) + 1, int(rows.max()) + 1))


def load_rgb(path, long_side, crop_opaque=False):
    if "::" in path:  # a file inside a Qt resource bundle (find_rcc_sources)
        bundle, inner = path.split("::", 1)
        im = Image.open(io.BytesIO(rcc_read(bundle, inner)))
    else:
        im = Image.open(path)
    im.load()
    if im.mode in ("RGBA", "LA", "P"):
        im = im.convert("RGBA")
        if crop_opaque:
            im = opaque_crop(im)
        bg = Image.new("RGBA", im.size, (0, 0, 0, 255))
        im = Image.alpha_composite(bg, im)
    im = im.convert("RGB")
    s = long_side / max(im.size)
    if s < 1:
        im = im.resize((max(1, round(im.width * s)), max(1, round(im.height * s))), Image.LANCZOS)
    return im


def make_clip(img, motion, n=17, size=256):
    """Camera-like motion over a still: the image is first reduced (Lanczos) so that one output
    pixel covers `scale` source pixels, then every frame is an affine resample (bicubic) of a
    size x size window around the centre that pans by `pan` output pixels in total, zooms in by
    `zoom` (log-linear) and rotates by `rot` radians, with ease-in/ease-out timing."""
    scale = motion["scale"]
    base = img.resize((max(size + 8, round(img.width / scale * 1.0)),
                       max(size + 8, round(img.height / scale * 1.0))), Image.LANCZOS)
    W, H = base.size
    frames = []
    for i in range(n):
        u = i / (n - 1)
        e = 0.5 - 0.5 * math.cos(math.pi * u)  # ease in/out
        z = motion["zoom"] ** e                  # >1: zoom in over the clip
        ang = motion["rot"] * e
        # pan: total camera displacement over the clip in output pixels (dx, dy), centred
        cx = W / 2 + motion["pan"][0] * (e - 0.5)
        cy = H / 2 + motion["pan"][1] * (e - 0.5)
        # Affine map output (x, y) -> base: centre + R * (x - size/2) / z
        c, s_ = math.cos(ang), math.sin(ang)
        a, b = c / z, -s_ / z
        d, e2 = s_ / z, c / z
        x0 = cx - a * size / 2 - b * size / 2
        y0 = cy - d * size / 2 - e2 * size / 2
        fr = base.transform((size, size), Image.AFFINE, (a, b, x0, d, e2, y0), resample=Image.BICUBIC)
        frames.append(fr)
    return frames


def write_jpeg_dir(frames, dest, quality=90):
    """Frames as dest/000.jpg ... (the engine reads an image-sequence directory in name order)."""
    os.makedirs(dest, exist_ok=True)
    for f in glob.glob(os.path.join(dest, "*")):
        os.remove(f)
    for i, f in enumerate(frames):
        f.save(os.path.join(dest, f"{i:03d}.jpg"), "JPEG", quality=quality, optimize=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--roots", nargs="*", default=[], help="extra roots searched like / (dpkg -x dirs)")
    ap.add_argument("--out", default=os.path.join(REPO, ".demo-data"))
    ap.add_argument("--clips", default=os.path.join(REPO, "resources", "demo", "clips"))
    ap.add_argument("--long-side", type=int, default=1024)
    ap.add_argument("--quality", type=int, default=90)
    ap.add_argument("--max-mib", type=float, default=34.0)
    ap.add_argument("--val", default="Kite,Garden,coffee,Shell",
                    help="pack images kept for validation (not trained on)")
    ap.add_argument("--no-clips", action="store_true")
    ap.add_argument("--clip-quality", type=int, default=90)
    args = ap.parse_args()

    roots = ["/"] + args.roots
    cands = find_sources(roots) + find_rcc_sources(roots)
    train = [c for c in cands if not is_held_out(c[2])]
    held = [c for c in cands if is_held_out(c[2])]
    print(f"{len(cands)} candidate stills, {len(held)} held out, {len(train)} for the pack")
    if not train:
        print("no sources found: install the packages named in the docstring or pass --roots")
        return 1

    img_dir = os.path.join(args.out, "images")
    os.makedirs(img_dir, exist_ok=True)
    for f in glob.glob(os.path.join(img_dir, "*.jpg")):
        os.remove(f)
    val_names = set(args.val.split(",")) if args.val else set()
    index, total = [], 0
    for pkg, lic, path, name in train:
        # the stellarium panoramas have transparent skies; the older sources keep their
        # composite on black (unchanged packs)
        im = load_rgb(path, args.long_side, crop_opaque=pkg == "stellarium-data")
        if min(im.size) < 200 or np.asarray(im).std() < 4:  # tiny or flat: nothing to learn
            continue
        buf = io.BytesIO()
        im.save(buf, "JPEG", quality=args.quality, optimize=True)
        data = buf.getvalue()
        if total + len(data) > args.max_mib * 2**20:
            print(f"size limit reached, skipping {path}")
            continue
        fname = f"{pkg}__{name}.jpg".replace(" ", "_")
        with open(os.path.join(img_dir, fname), "wb") as fo:
            fo.write(data)
        total += len(data)
        index.append({"file": f"images/{fname}", "package": pkg, "licence": lic,
                      "source": package_path(path, roots), "size": list(im.size),
                      "split": "val" if name in val_names else "train"})
    pkgs = {}
    for e in index:
        pkgs.setdefault(e["package"], e["licence"])
    meta = {"images": index, "packages": pkgs, "total_bytes": total,
            "held_out_sources": {k: {"package": v[0], "licence": v[1], "path": v[2]}
                                 for k, v in HELD_OUT.items()},
            "note": "held-out sources are never in this pack; evaluation clips are made from them"}
    with open(os.path.join(args.out, "index.json"), "w") as fo:
        json.dump(meta, fo, indent=1)
    nval = sum(e["split"] == "val" for e in index)
    print(f"pack: {len(index)} images ({nval} val), {total / 2**20:.2f} MiB in {args.out}")

    if args.no_clips:
        return 0
    os.makedirs(args.clips, exist_ok=True)
    lines = ["# Held-out evaluation clips", "",
             "256x256, 17 frames, one directory of JPEG frames (000.jpg ... 016.jpg, quality 90) per "
             "clip; `seedvae roundtrip resources/demo/clips/<name>` reads it. Synthesised camera motion "
             "(pan / zoom / slight rotation with ease-in-out) over stills that are NOT in the demo "
             "model's training data (tools/demo_model/prepare_data.py).", "",
             "| clip | package | licence | source | motion |", "| --- | --- | --- | --- | --- |"]
    for name, (pkg, lic, suffix, motion) in HELD_OUT.items():
        src = [c for c in held if suffix in c[2]]
        if not src:
            print(f"held-out source for {name} not found ({suffix})")
            continue
        path = src[0][2]
        im = load_rgb(path, 4096)
        frames = make_clip(im, motion)
        out = os.path.join(args.clips, name)
        write_jpeg_dir(frames, out, args.clip_quality)
        size = sum(os.path.getsize(os.path.join(out, f)) for f in os.listdir(out))
        print(f"clip {out}/: {size / 1024:.0f} KiB from {path}")
        lines.append(f"| {name}/ | {pkg} | {lic} | {path.split('/usr/', 1)[-1]} | {motion} |")
    with open(os.path.join(args.clips, "README.md"), "w") as fo:
        fo.write("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
