#!/usr/bin/env python3
"""The FFmpeg and OpenCV runtime of a media-enabled CLI, for the GPU machine, which has neither.

Debian's libavcodec, libavformat and OpenCV's imgcodecs pull in some 200 libraries (GDAL, every
codec, TLS, X11: ~270 MB), more than the device tool carries. This copies the ones a video round
trip runs (FFmpeg's five, x264 for H.264 output, OpenCV's core/imgproc/imgcodecs, TBB and the
compression libraries) and replaces every other dependency with a stub: a library of the same
soname that defines the symbols the copied ones import, with their versions, each function
returning 0. Debian builds these libraries with BIND_NOW, so every imported symbol must exist at
load. FFmpeg asks a few of the stubbed codec libraries for their versions when it lists its codecs
(a 0 does no harm there); none of them does work in an H.264/H.265/FFV1 video read or write.
libgme stays real: its probe, which every input's format detection runs, dereferences a string
that a stub would return as 0.

  gpu-media-libs.py OUTDIR BINARY...   writes OUTDIR/*.so* (copies and stubs) for the binaries
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

REAL = ["libopencv_imgcodecs.so.406", "libopencv_imgproc.so.406", "libopencv_core.so.406",
        "libavformat.so.59", "libavcodec.so.59", "libavutil.so.57", "libswscale.so.6",
        "libswresample.so.4", "libx264.so.164", "libtbb.so.12", "libz.so.1", "libbz2.so.1.0",
        "liblzma.so.5", "libzstd.so.1", "libgme.so.0", "libavfilter.so.8", "libavdevice.so.59",
        "libpostproc.so.56"]
# every Linux has these (glibc, the compiler's runtime), or the dist carries them (oneDNN, OpenMP,
# OpenCL for oneDNN, the CUDA libraries)
SYSTEM = {"libc.so.6", "libm.so.6", "libstdc++.so.6", "libgcc_s.so.1", "ld-linux-x86-64.so.2",
          "libdl.so.2", "libpthread.so.0", "librt.so.1", "libresolv.so.2", "libgomp.so.1",
          "libdnnl.so.2", "libcudart.so.13", "libcublas.so.13", "libcublasLt.so.13",
          "libcudnn.so.9", "libOpenCL.so.1"}


def sh(*args):
    return subprocess.run(args, check=True, capture_output=True, text=True).stdout


def path_of(soname):
    for line in sh("ldconfig", "-p").splitlines():
        parts = line.strip().split(" => ")
        if len(parts) == 2 and parts[0].split(" ")[0] == soname and "x86-64" in parts[0]:
            return parts[1]
    raise SystemExit(f"{soname}: not installed")


def needed(path):
    return re.findall(r"\(NEEDED\)\s+Shared library: \[(.+?)\]", sh("readelf", "-d", path))


# objdump -T: "addr flags section size version [.visibility] name"
SYM = re.compile(
    r"^[0-9a-f]+\s+(.{7})\s+(\S+)\s+([0-9a-f]+)\s+(?:(\(?[^\s)]*\)?)\s+)?(?:\.\w+\s+)?(\S+)$")


def dynsyms(path):
    out = []
    for line in sh("objdump", "-T", path).splitlines():
        m = SYM.match(line.strip())
        if m:
            flags, section, size, version, name = m.groups()
            out.append((flags, section, int(size, 16), (version or "").strip("()"), name))
    return out


def main():
    outdir, binaries = sys.argv[1], sys.argv[2:]
    os.makedirs(outdir, exist_ok=True)
    importers = binaries + [path_of(s) for s in REAL]
    wanted = {}  # name -> version wanted by an importer
    for p in importers:
        for flags, section, size, version, name in dynsyms(p):
            if section == "*UND*":
                wanted.setdefault(name, version)
    stubs = set()
    for p in importers:
        stubs.update(n for n in needed(p) if n not in SYSTEM and n not in REAL)
    for soname in REAL:
        shutil.copy2(path_of(soname), os.path.join(outdir, soname))
    for soname in sorted(stubs):
        defs, versions, seen = [], {}, set()
        for flags, section, size, version, name in dynsyms(path_of(soname)):
            if section == "*UND*" or name not in wanted or name in seen:
                continue
            seen.add(name)  # one definition, in the version its importer asks for
            kind = "O" if "O" in flags else "F"
            defs.append((kind, size, name))
            version = wanted[name] or version
            if version and version != "Base":
                versions.setdefault(version, []).append(name)
        with tempfile.TemporaryDirectory() as tmp:
            src = os.path.join(tmp, "stub.c")
            with open(src, "w") as f:
                for kind, size, name in defs:
                    if kind == "O":
                        f.write(f"char {name}[{max(size, 1)}] __attribute__((aligned(16)));\n")
                    else:
                        f.write(f"long {name}(void) {{ return 0; }}\n")
            cmd = ["gcc", "-shared", "-fPIC", "-O0", "-w", "-o", os.path.join(outdir, soname),
                   f"-Wl,-soname,{soname}", src]
            if versions:
                vs = os.path.join(tmp, "versions")
                with open(vs, "w") as f:
                    for v, names in versions.items():
                        f.write(v + " { global: " + "; ".join(names) + "; };\n")
                cmd.append(f"-Wl,--version-script={vs}")
            subprocess.run(cmd, check=True)
        print(f"stub {soname}: {len(defs)} symbols")


main()
