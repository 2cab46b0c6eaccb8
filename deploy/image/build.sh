#!/usr/bin/env bash
# Builds the OmniForge container image, omniforge:VERSION and omniforge:latest, into the local
# podman/buildah store, from Debian's packages only (no Docker Hub, no other image registry):
#
#   deploy/image/build.sh [--binary PATH] [--tag VERSION]
#
#   --binary PATH   the omniforge binary to ship [default: `cargo build --profile dist`, the
#                   stripped release build, and target/dist/omniforge]
#   --tag VERSION   the tag [default: what `omniforge --version` says]
#
# Two layers:
#   1. the root filesystem: a minimal Debian bookworm (mmdebstrap, variant essential) with
#      bubblewrap, python3, ca-certificates and tini, uv from PyPI (the pin the server installs,
#      UV_VERSION in crates/omniforge-script/src/env/python.rs) as /usr/local/bin/uv, the user
#      `omniforge` (uid 10001) and /var/lib/omniforge. It is kept in the store as
#      localhost/omniforge-rootfs:HASH, HASH being that of this script, the package list and the
#      uv pin, and is rebuilt only when they change;
#   2. the binary, at /usr/local/bin/omniforge.
# Docker format (`buildah commit --format docker`): it carries HEALTHCHECK `omniforge health`.
# amd64 only. Run as root (rootful podman); needs podman, buildah and mmdebstrap (Debian
# packages, installed by scripts/bootstrap).
#
# Environment:
#   OMNIFORGE_IMAGE_SOURCES  an apt sources file (one-line or deb822) for mmdebstrap [default:
#                            the bookworm entries of this machine's /etc/apt/sources.list*]
#   OMNIFORGE_IMAGE_PIP      a Python with pip to fetch uv with [default: a throwaway venv of
#                            the host's python3]
#   PODMAN_FLAGS             extra global flags for podman and buildah (e.g. --root DIR)
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
log() { printf 'image: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

binary= tag=
while (($#)); do
  case $1 in
    --binary) binary=${2:?--binary needs a PATH}; shift 2 ;;
    --tag) tag=${2:?--tag needs a VERSION}; shift 2 ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument $1 (see --help)" ;;
  esac
done
[[ $(uname -m) == x86_64 ]] || die "the image is amd64 only"
[[ $(id -u) == 0 ]] || die "run as root (rootful podman; see deploy/image/README.md)"
for tool in podman buildah mmdebstrap; do
  command -v "$tool" >/dev/null || die "$tool is missing: run scripts/bootstrap (or apt-get install $tool)"
done
# shellcheck disable=SC2206
pflags=(${PODMAN_FLAGS:-})
bah() { buildah "${pflags[@]}" "$@"; }
# Working containers in Docker's format too, so that their HEALTHCHECK is kept.
export BUILDAH_FORMAT=docker

if [[ -z $binary ]]; then
  log "cargo build --profile dist --bin omniforge"
  (cd "$ROOT" && cargo build --locked --profile dist --bin omniforge)
  binary=$ROOT/target/dist/omniforge
fi
[[ -x $binary ]] || die "$binary is not an executable"
binary=$(realpath "$binary")
if [[ -z $tag ]]; then
  tag=$("$binary" --version | awk '{print $2}')
  [[ -n $tag ]] || die "cannot read the version from $binary --version"
fi

# --- layer 1: the root filesystem, cached by hash ------------------------------------------
UV_VERSION=$(sed -n 's/^pub const UV_VERSION: &str = "\(.*\)";/\1/p' "$ROOT/crates/omniforge-script/src/env/python.rs")
[[ -n $UV_VERSION ]] || die "cannot read UV_VERSION from crates/omniforge-script/src/env/python.rs"

work=$(mktemp -d)
cleanup() { rm -rf "$work"; [[ -z ${ctr:-} ]] || bah rm "$ctr" >/dev/null 2>&1 || true; }
trap cleanup EXIT
hash=$( { cat "$ROOT/deploy/image/rootfs.sh"; printf 'uv==%s\n' "$UV_VERSION"; } | sha256sum | cut -c1-16)
rootfs=localhost/omniforge-rootfs:$hash
if podman "${pflags[@]}" image exists "$rootfs"; then
  log "root filesystem $rootfs: cached"
else
  log "root filesystem $rootfs: deploy/image/rootfs.sh (mmdebstrap bookworm), uv $UV_VERSION"
  started=$SECONDS
  "$ROOT/deploy/image/rootfs.sh" "$work" "$UV_VERSION"
  ctr=$(bah from --pull=never scratch)
  bah add --quiet "$ctr" "$work/rootfs.tar" / >/dev/null
  bah copy --quiet --chmod 0755 "$ctr" "$work/uv/bin/uv" /usr/local/bin/uv >/dev/null
  bah commit --quiet --format docker --rm "$ctr" "$rootfs" >/dev/null
  ctr=
  log "root filesystem $rootfs: built in $((SECONDS - started)) s"
fi

# --- layer 2: the binary, and the image's configuration -----------------------------------
ctr=$(bah from --pull=never "$rootfs")
bah copy --quiet --chmod 0755 "$ctr" "$binary" /usr/local/bin/omniforge >/dev/null
bah config \
  --arch amd64 --os linux \
  --user omniforge:omniforge \
  --workingdir /var/lib/omniforge \
  --volume /var/lib/omniforge \
  --env OMNIFORGE_DATA_DIR=/var/lib/omniforge \
  --env OMNIFORGE_LISTEN=0.0.0.0:8765 \
  --env OMNIFORGE_LOG_FORMAT=json \
  --env OMNIFORGE_SANDBOX=strict \
  --env SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt \
  --env HOME=/var/lib/omniforge \
  --port 8765/tcp \
  --entrypoint '["/usr/bin/tini", "--", "/usr/local/bin/omniforge"]' \
  --cmd 'serve' \
  --stop-signal SIGTERM \
  --healthcheck 'CMD omniforge health' \
  --healthcheck-interval 30s --healthcheck-timeout 10s --healthcheck-start-period 10s --healthcheck-retries 3 \
  --label org.opencontainers.image.title=omniforge \
  --label org.opencontainers.image.version="$tag" \
  --label org.opencontainers.image.licenses=Apache-2.0 \
  --label io.omniforge.rootfs="$rootfs" \
  "$ctr"
bah commit --quiet --format docker --rm "$ctr" "localhost/omniforge:$tag" >/dev/null
ctr=
bah tag "localhost/omniforge:$tag" localhost/omniforge:latest
size=$(podman "${pflags[@]}" image inspect --format '{{.Size}}' "localhost/omniforge:$tag")
log "built localhost/omniforge:$tag (and :latest), $((size / 1024 / 1024)) MiB"
printf 'localhost/omniforge:%s\n' "$tag"
