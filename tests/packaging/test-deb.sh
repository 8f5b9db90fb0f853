#!/usr/bin/env bash
# Tests the Debian package:
#   1. dpkg-deb -I: name, version, architecture, and Depends from dpkg-shlibdeps (libc6,
#      libstdc++6, Qt, OpenCV, oneDNN as built), every one satisfiable on this machine
#      (apt-get --simulate install);
#   2. dpkg-deb -c: the CLI, the studio, the desktop entry and icon, the licences, nothing outside
#      /usr; the desktop entry validates (desktop-file-validate, when installed);
#   3. dpkg -x into a scratch root, then from the scratch root's paths, with a minimal environment:
#      no RUNPATH into the build tree, every library found; seedvae --version, make-weights + info,
#      a tiny round trip writing a video; seedvae-studio --version, a headless studio run, and the
#      real main window (Qt offscreen platform) running an A/B comparison and saving screenshots;
#   4. with --system-install (root; CI): dpkg -i, run /usr/bin/seedvae, dpkg -r, nothing left.
# The scratch root is removed at the end.
#
#   tests/packaging/test-deb.sh [--system-install] PACKAGE.deb
set -euo pipefail
system_install=0
if [[ "${1:-}" == --system-install ]]; then system_install=1; shift; fi
deb="$(readlink -f "${1:?usage: $0 [--system-install] PACKAGE.deb}")"
scratch="$(mktemp -d /tmp/seedvae-deb.XXXXXX)"
trap 'rm -rf "$scratch"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
now() { date +%s%3N; }
elapsed() { local ms=$(($(now) - $1)); printf '%d.%d' $((ms / 1000)) $((ms % 1000 / 100)); }

# ---- 1. control fields --------------------------------------------------------------------------
dpkg-deb -I "$deb" >/dev/null || fail "not a Debian package: $deb"
field() { dpkg-deb -f "$deb" "$1"; }
[[ "$(field Package)" == seedvae-studio ]] || fail "Package: $(field Package)"
[[ "$(field Version)" =~ ^[0-9]+\.[0-9]+\.[0-9]+ ]] || fail "Version: $(field Version)"
[[ "$(field Architecture)" == "$(dpkg --print-architecture)" ]] || fail "Architecture: $(field Architecture)"
depends=$(field Depends)
echo "Depends: $depends"
# Package names of Depends, one a line (versions and alternatives' separators dropped).
names=$(sed 's/([^)]*)//g; s/|/,/g; s/ //g' <<<"$depends" | tr ',' '\n')
depends_on() { grep -qxF "$1" <<<"$names"; }
for p in libc6 libstdc++6 libgcc-s1 libgomp1; do
  depends_on "$p" || fail "Depends lacks $p (dpkg-shlibdeps not run?)"
done
grep -qE "libc6 \(>= [0-9.]+\)" <<<"$depends" || fail "Depends has no versioned libc6"
# Every dependency names an existing package (alternatives: the first one).
for p in $names; do
  apt-cache show "$p" >/dev/null 2>&1 || fail "Depends names unknown package $p"
done
if [[ $EUID == 0 ]]; then
  apt-get install --simulate -q "$deb" >"$scratch/apt-sim.log" 2>&1 \
    || { cat "$scratch/apt-sim.log" >&2; fail "apt-get cannot satisfy the dependencies"; }
fi

# ---- 2. contents --------------------------------------------------------------------------------
contents=$(dpkg-deb -c "$deb" | awk '{print $6}')
have_studio=0
grep -qx './usr/bin/seedvae-studio' <<<"$contents" && have_studio=1
expect=(./usr/bin/seedvae ./usr/share/doc/seedvae-studio/LICENSE
        ./usr/share/doc/seedvae-studio/THIRD_PARTY_NOTICES.md ./usr/share/doc/seedvae-studio/copyright
        ./usr/share/doc/seedvae-studio/README.md)
if [[ $have_studio == 1 ]]; then
  expect+=(./usr/share/applications/seedvae-studio.desktop
           ./usr/share/icons/hicolor/scalable/apps/seedvae-studio.svg)
  for p in libqt6widgets6 libqt6svg6; do
    depends_on "$p" || fail "Depends lacks $p"
  done
fi
for f in "${expect[@]}"; do grep -qx "$f" <<<"$contents" || fail "package lacks $f"; done
outside=$(grep -v '^\./usr/' <<<"$contents" | grep -vx './' | grep -vx './usr/' || true)
[[ -z "$outside" ]] || fail "files outside /usr: $outside"
echo "contents: $(grep -vE '/$' <<<"$contents" | tr '\n' ' ')"

# ---- 3. run from a scratch root -------------------------------------------------------------------
t=$(now)
dpkg -x "$deb" "$scratch/root"
bin="$scratch/root/usr/bin"
if command -v desktop-file-validate >/dev/null && [[ $have_studio == 1 ]]; then
  desktop-file-validate "$scratch/root/usr/share/applications/seedvae-studio.desktop" \
    || fail "desktop entry does not validate"
fi
for exe in "$bin"/*; do
  if readelf -d "$exe" | grep -qE 'R(UN)?PATH'; then fail "$exe has an RPATH: $(readelf -d "$exe" | grep PATH)"; fi
  missing=$(ldd "$exe" | grep 'not found' || true)
  [[ -z "$missing" ]] || fail "$exe: libraries not found: $missing"
done
# A clean environment: the binaries must find everything through the system's library paths.
home="$scratch/home"
mkdir -p "$home" "$scratch/files"
clean=(env -i PATH=/usr/bin:/bin HOME="$home" XDG_CONFIG_HOME="$home/.config"
       XDG_DATA_HOME="$home/.local/share" XDG_CACHE_HOME="$home/.cache" XDG_RUNTIME_DIR="$scratch/run")
mkdir -m 700 "$scratch/run"

version=$("${clean[@]}" "$bin/seedvae" --version)
echo "$version" | sed 's/^/  /'
grep -q "^seedvae $(field Version | cut -d- -f1)" <<<"$version" || fail "--version: $version"
grep -q "cpu backend: " <<<"$version" || fail "--version names no CPU kernels"
"${clean[@]}" "$bin/seedvae" make-weights --synthetic tiny -o "$scratch/files/tiny.safetensors" >/dev/null
"${clean[@]}" "$bin/seedvae" info "$scratch/files/tiny.safetensors" --json | grep -q '"kind": "vae_checkpoint"' \
  || fail "info of the synthetic weights"
rt=$("${clean[@]}" "$bin/seedvae" roundtrip --sample-clip --size 64x48 --frames 9 --synthetic tiny \
       --threads 2 -q --json -o "$scratch/files/recon.avi")
grep -q '"frames": 9' <<<"$rt" || fail "roundtrip: $rt"
[[ -s "$scratch/files/recon.avi" ]] || fail "roundtrip wrote no video"
# The trained demo model is packaged and is the default weights, with the studio's demo clip.
[[ -s "$scratch/root/usr/share/seedvae/demo_vae.safetensors" ]] || fail "no demo model in the package"
n=$(ls "$scratch/root/usr/share/seedvae/demo-clip"/*.jpg 2>/dev/null | wc -l)
[[ $n -eq 17 ]] || fail "demo clip: $n frames in the package, expected 17"
rt=$("${clean[@]}" "$bin/seedvae" roundtrip --sample-clip --size 64x48 --frames 9 --threads 2 -q --json)
grep -q 'share/seedvae/demo_vae.safetensors' <<<"$rt" || fail "default weights are not the demo model: $rt"
echo "CLI from the scratch root: $(elapsed "$t") s"

if [[ $have_studio == 1 ]]; then
  t=$(now)
  sv=$("${clean[@]}" QT_QPA_PLATFORM=offscreen "$bin/seedvae-studio" --version)
  echo "$sv" | sed 's/^/  /'
  grep -q "^seedvae-studio " <<<"$sv" && grep -q "qt: 6\." <<<"$sv" || fail "studio --version: $sv"
  # The headless job (no window): report and stills.
  "${clean[@]}" QT_QPA_PLATFORM=offscreen "$bin/seedvae-studio" --headless --sample-size 64x48 \
    --frames 9 --no-video -o "$scratch/files/report" >"$scratch/headless.log" 2>&1 \
    || { cat "$scratch/headless.log" >&2; fail "studio --headless"; }
  ls "$scratch/files/report"/*.md >/dev/null 2>&1 || fail "studio --headless wrote no report"
  echo "studio headless run: $(elapsed "$t") s"
  # The real main window on the offscreen platform: it opens the video the CLI wrote (64x48x9),
  # runs an A/B comparison, then saves screenshots of its views.
  t=$(now)
  "${clean[@]}" QT_QPA_PLATFORM=offscreen "$bin/seedvae-studio" --screenshots "$scratch/files/shots" \
    --input "$scratch/files/recon.avi" --sample-size 64x48 >"$scratch/gui.log" 2>&1 \
    || { cat "$scratch/gui.log" >&2; fail "studio window (offscreen)"; }
  n=$(ls "$scratch/files/shots"/studio-*.png 2>/dev/null | wc -l)
  [[ $n -ge 5 ]] || { cat "$scratch/gui.log" >&2; fail "studio window saved $n screenshots"; }
  echo "studio main window (offscreen, A/B run, $n screenshots): $(elapsed "$t") s"
fi
rm -rf "$scratch/root"

# ---- 4. real installation ---------------------------------------------------------------------------
if [[ $system_install == 1 ]]; then
  [[ $EUID == 0 ]] || fail "--system-install needs root"
  if dpkg-query -W -f='${Status}' seedvae-studio 2>/dev/null | grep -q "install ok"; then
    fail "seedvae-studio is already installed on this machine; not touching it"
  fi
  t=$(now)
  DEBIAN_FRONTEND=noninteractive dpkg -i "$deb" >/dev/null || fail "dpkg -i"
  "${clean[@]}" /usr/bin/seedvae --version | head -n 1
  if [[ $have_studio == 1 ]]; then
    "${clean[@]}" QT_QPA_PLATFORM=offscreen /usr/bin/seedvae-studio --version | head -n 1
  fi
  files=$(dpkg -L seedvae-studio | while read -r f; do [[ -f "$f" ]] && echo "$f"; done)
  dpkg -r seedvae-studio >/dev/null || fail "dpkg -r"
  for f in $files; do [[ ! -e "$f" ]] || fail "left after dpkg -r: $f"; done
  dpkg-query -W -f='${Status}' seedvae-studio 2>/dev/null | grep -q "install ok" && fail "still installed"
  echo "dpkg -i / run / dpkg -r: $(elapsed "$t") s"
fi
echo "PASS: Debian package ($(basename "$deb"))"
