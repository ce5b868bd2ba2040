#!/usr/bin/env bash
# Build the TileLang commit checked out in the current directory into a wheel in $HARNESS_WHEEL_DIR, compiling
# only TileLang's own C++ (libtilelang.so) and taking TVM's libraries from a release wheel that pins the same TVM
# commit: the --build command of `harness bisect --repo` where a cold TVM build would not fit (its ~540 files are
# most of an hour and more on 2 cores; TileLang's ~120 a fraction of it).
#
#   TILELANG_RELEASE_WHEEL  the release's wheel (tilelang-X.Y.Z-*.whl); the commit must pin the TVM that tag vX.Y.Z
#                           pins (checked: else the build fails and the bisect skips the commit)
#   TILELANG_ANY_TVM_PIN=1  build a commit that pins another TVM all the same, against the release's (its headers
#                           too): for a range whose pin no release has; an approximation, true where the TVM
#                           commits between the two pins do not touch what the case exercises (say so)
#   TILELANG_DEPS, TILELANG_BUILD_PYTHON, BUILD_JOBS: as for build_tilelang_commit.sh
#
# The wheel is the release's, with the commit's tilelang/ Python package, its src/ (the CUDA templates the JIT
# compiles against) and its libtilelang.so; the TVM libraries, the TVM Python package, CUTLASS and the Cython
# wrapper stay the release's.
set -euo pipefail
: "${HARNESS_WHEEL_DIR:?}" "${TILELANG_DEPS:?}" "${TILELANG_BUILD_PYTHON:?}" "${TILELANG_RELEASE_WHEEL:?}"

release=$(basename "$TILELANG_RELEASE_WHEEL" | cut -d- -f2)
pin=$(git ls-tree HEAD 3rdparty/tvm | awk '{print $3}')
release_pin=$(git ls-tree "v$release" 3rdparty/tvm | awk '{print $3}')
if [ "$pin" != "$release_pin" ]; then
    if [ "${TILELANG_ANY_TVM_PIN:-}" != 1 ]; then
        echo "this commit pins TVM $pin, release $release pins $release_pin: its TVM libraries do not fit" >&2
        exit 1
    fi
    echo "this commit pins TVM $pin; built against release $release's $release_pin (TILELANG_ANY_TVM_PIN)" >&2
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
src=$tmp/tilelang
mkdir "$src"
git archive HEAD | tar -x -C "$src"
git ls-tree -r HEAD | awk -v tvm="$release_pin" '$2 == "commit" {print ($4 == "3rdparty/tvm" ? tvm : $3), $4}' |
while read -r sha path; do
    from=$TILELANG_DEPS/$path/$sha
    if [ ! -d "$from" ]; then
        echo "no tree for $path at $sha under $TILELANG_DEPS" >&2
        exit 1
    fi
    cp -a "$from/." "$src/$path/"
done

export CCACHE_BASEDIR=$src CCACHE_NOHASHDIR=1
export PATH=$(dirname "$TILELANG_BUILD_PYTHON"):/usr/local/cuda/bin:$PATH
# Unoptimized (-O0): a bisect tests what the compiler does, not how fast it runs, and -O0 compiles faster.
cmake -S "$src" -B "$src/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS_RELEASE="-O0 -DNDEBUG" \
    -DUSE_CUDA=ON -DUSE_LLVM=OFF \
    -DTILELANG_RELEASE_BUILD=ON -DPython3_EXECUTABLE="$TILELANG_BUILD_PYTHON" -DPython_EXECUTABLE="$TILELANG_BUILD_PYTHON"
ninja -C "$src/build" -j "${BUILD_JOBS:-2}" tilelang_objs

wheel=$tmp/wheel
mkdir "$wheel"
(cd "$wheel" && "$TILELANG_BUILD_PYTHON" -m zipfile -e "$TILELANG_RELEASE_WHEEL" .)
lib=$wheel/tilelang/lib
# libtilelang.so linked as the release links it: against the libraries of its lib/ that the release's own
# libtilelang.so needs (TVM's, which 0.1.9 ships as one libtvm.so and 0.1.12 as two, and the stubs), found at run
# time through the same RUNPATH; tvm_ffi's symbols resolve there too.
needs=$(readelf -d "$lib/libtilelang.so" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
runpath=$(readelf -d "$lib/libtilelang.so" | sed -n 's/.*(RUNPATH).*\[\(.*\)\]/\1/p')
links=$(for so in $needs; do if [ -e "$lib/$so" ]; then echo "-l:$so"; fi; done)
find "$src/build/CMakeFiles/tilelang_objs.dir" -name '*.o' | sort >"$tmp/objects"
# shellcheck disable=SC2086  # one word per library
g++ -shared -o "$tmp/libtilelang.so" @"$tmp/objects" -L"$lib" -Wl,--no-as-needed $links -Wl,--allow-shlib-undefined \
    -Wl,--enable-new-dtags,-rpath,"$runpath"
find "$wheel/tilelang" -mindepth 1 -maxdepth 1 ! -name lib ! -name 3rdparty -exec rm -rf {} +
cp -a "$src/tilelang/." "$wheel/tilelang/"
cp -a "$src/src" "$wheel/tilelang/src"
cp "$tmp/libtilelang.so" "$lib/libtilelang.so"
# Releases up to 0.1.7.post3 also ship libtilelang_module.so, and their Python loads that one ("tilelang_module"
# unless TVM is runtime-only), not libtilelang.so. The commit's objects linked under that name too make the import
# abort (f03531562: "Global Function `ffi.Module.load_from_bytes.const_loader` is already registered"). So on such
# a wheel a build tests the commit's Python and CUDA templates with the release's C++: say so, for the bisect's log.
if [ -e "$lib/libtilelang_module.so" ]; then
    echo "warning: $(basename "$TILELANG_RELEASE_WHEEL") loads its own libtilelang_module.so: this build runs the" \
         "commit's Python and templates on the release's C++" >&2
fi
"$TILELANG_BUILD_PYTHON" - "$wheel" "$HARNESS_WHEEL_DIR/$(basename "$TILELANG_RELEASE_WHEEL")" <<'EOF'
import base64, hashlib, sys, zipfile
from pathlib import Path
root, out = Path(sys.argv[1]), sys.argv[2]
record = next(root.glob("*.dist-info")) / "RECORD"
files = sorted(p for p in root.rglob("*") if p.is_file() and p != record)
rows = []
with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
    for p in files:
        data = p.read_bytes()
        name = p.relative_to(root).as_posix()
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        rows.append(f"{name},sha256={digest},{len(data)}")
        z.write(p, name)
    rows.append(f"{record.relative_to(root).as_posix()},,")
    z.writestr(record.relative_to(root).as_posix(), "\n".join(rows) + "\n")
EOF
ccache --show-stats || true
