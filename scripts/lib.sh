# Shared by scripts/test and scripts/demo: installs what is missing and builds.
# Sourced, not run. Set OPFORGE_NO_INSTALL=1 to skip the installs.

# bubblewrap: the evaluator's sandbox (docs/architecture.md, "Sandbox"); libpq-dev: the
# PostgreSQL store; postgresql: the throwaway cluster its tests start (tests/pg/cluster);
# chromium (and a font for its screenshots): the web page's browser tests (tests/ui).
APT_PACKAGES="build-essential pkg-config meson ninja-build libmicrohttpd-dev libjansson-dev
libcurl4-openssl-dev libsqlite3-dev libpq-dev uuid-dev libyaml-dev libcmocka-dev python3-venv
curl bubblewrap postgresql chromium fonts-dejavu-core"
VENV="${OPFORGE_VENV:-$HOME/.cache/opforge/venv}"
TORCH_VERSION="${OPFORGE_TORCH_VERSION:-2.11.0}"
SCHEMATHESIS_VERSION="${OPFORGE_SCHEMATHESIS_VERSION:-4.32.5}"
# The packages KernelBench lists for running its tasks (its pyproject.toml), besides torch.
KERNELBENCH_PACKAGES="numpy einops ninja packaging"

say() { printf '==> %s\n' "$*" >&2; }

# Installs the Debian packages that are not there yet.
install_apt_packages() {
  [ "${OPFORGE_NO_INSTALL:-0}" = 1 ] && return 0
  local missing=()
  for p in $APT_PACKAGES; do
    dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  say "installing Debian packages: ${missing[*]}"
  local sudo=""
  [ "$(id -u)" = 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
}

# Creates the Python venv with torch (CPU use) and pytest, cached under ~/.cache/opforge.
install_python_venv() {
  [ "${OPFORGE_NO_INSTALL:-0}" = 1 ] && return 0
  if [ -x "$VENV/bin/python" ] && "$VENV/bin/python" -c 'import torch, pytest, einops' 2>/dev/null; then
    return 0
  fi
  say "creating $VENV with torch $TORCH_VERSION and pytest (first run only; large download)"
  mkdir -p "$(dirname "$VENV")"
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q --upgrade pip
  # What KernelBench's tasks import besides torch (its pyproject: numpy, einops, ninja).
  "$VENV/bin/pip" install -q "torch==$TORCH_VERSION" pytest $KERNELBENCH_PACKAGES
}

# Installs the pinned schemathesis (PyPI) into the venv, for scripts/test's spec pass.
install_schemathesis() {
  [ "${OPFORGE_NO_INSTALL:-0}" = 1 ] && return 0
  if "$VENV/bin/schemathesis" --version 2>/dev/null | grep -q "version $SCHEMATHESIS_VERSION\$"; then
    return 0
  fi
  say "installing schemathesis $SCHEMATHESIS_VERSION into $VENV"
  "$VENV/bin/pip" install -q "schemathesis==$SCHEMATHESIS_VERSION"
}

# Checks the CUDA toolkit (headers and NVRTC) that the build needs.
check_cuda() {
  local root="${OPFORGE_CUDA:-/usr/local/cuda}"
  if [ ! -f "$root/include/nvrtc.h" ] || ! ls "$root"/lib64/libnvrtc.so* >/dev/null 2>&1; then
    say "CUDA toolkit not found in $root (need include/nvrtc.h and lib64/libnvrtc.so);"
    say "install CUDA 13 there or set OPFORGE_CUDA"
    return 1
  fi
}

# Configures (once) and builds DIR with extra meson options.
build_dir() {
  local dir="$1"; shift
  local root="${OPFORGE_CUDA:-/usr/local/cuda}"
  if [ ! -f "$dir/build.ninja" ]; then
    meson setup "$dir" -Dcudadir="$root" "$@" >/dev/null
  fi
  ninja -C "$dir" >/dev/null
}
