#!/usr/bin/env bash
# Build the TileLang commit checked out in the current directory into a wheel in $HARNESS_WHEEL_DIR:
# the --build command of `harness bisect --repo`, which runs it in a scratch worktree of each commit.
#
#   TILELANG_DEPS          submodule trees by pin: $TILELANG_DEPS/<submodule path>/<pinned sha>/
#                          (e.g. 3rdparty/tvm/8df8ebd6.../ from the 3rdparty/ of a TileLang sdist)
#   TILELANG_BUILD_PYTHON  python of an environment with the [build-system] requirements of
#                          pyproject.toml and cmake >= 3.26 (the build runs without isolation);
#                          cython < 3.3, as 3.3 refuses the cp38 limited API the wheels target
#   BUILD_JOBS             parallel compile jobs (default 2)
set -euo pipefail
: "${HARNESS_WHEEL_DIR:?}" "${TILELANG_DEPS:?}" "${TILELANG_BUILD_PYTHON:?}"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
src=$tmp/tilelang

# The sources without .git: with a .git, TileLang's CMake runs `git submodule update`, which needs
# the network and the submodules' full history.
mkdir "$src"
git archive HEAD | tar -x -C "$src"

# git archive leaves each submodule an empty directory: fill it with the tree of its pinned commit.
# A pin that TILELANG_DEPS lacks fails the build (the bisect skips the commit).
git ls-tree -r HEAD | awk '$2 == "commit" {print $3, $4}' | while read -r pin path; do
    from=$TILELANG_DEPS/$path/$pin
    if [ ! -d "$from" ]; then
        echo "no tree for $path at $pin under $TILELANG_DEPS" >&2
        exit 1
    fi
    cp -a "$from/." "$src/$path/"
done

# version_provider.py records the commit from here when there is no .git.
git rev-parse HEAD >"$src/.git_commit.txt"

# ccache: TileLang's CMake makes it the compiler launcher when it is installed (CCACHE_DIR is set by
# the harness). Paths under the source are hashed relative to it (base_dir; on Linux TileLang's
# CMake leaves that to a fixed build folder), so the random $tmp does not spoil hits and a commit
# recompiles only what it changed.
export CCACHE_BASEDIR=$src CCACHE_NOHASHDIR=1
# nvrtc.h, for TileLang's nvrtc stub: a CUDA toolkit without it (such as a toolkit assembled
# from pip packages) takes it from the nvidia-cuda-nvrtc wheel in the build environment.
nvrtc=$("$TILELANG_BUILD_PYTHON" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/nvidia/cu13/include
if [ -f "$nvrtc/nvrtc.h" ]; then
    export CPLUS_INCLUDE_PATH=$nvrtc${CPLUS_INCLUDE_PATH:+:$CPLUS_INCLUDE_PATH}
fi
# The build: CUDA on (nvcc from /usr/local/cuda), LLVM off, Ninja, niced so that the machine stays
# responsive during the hour and more of a cold build.
export PATH=$(dirname "$TILELANG_BUILD_PYTHON"):/usr/local/cuda/bin:$PATH
export CMAKE_GENERATOR=Ninja CMAKE_BUILD_PARALLEL_LEVEL=${BUILD_JOBS:-2}
export CMAKE_ARGS="-DUSE_CUDA=ON -DUSE_LLVM=OFF" USE_CUDA=ON USE_LLVM=OFF
nice -n 19 "$TILELANG_BUILD_PYTHON" -m pip wheel --no-build-isolation --no-deps -w "$HARNESS_WHEEL_DIR" "$src"
ccache --show-stats || true
