#!/usr/bin/env bash
# The root filesystem of the OmniForge image (deploy/image/build.sh runs it; the image's first
# layer is cached under the hash of this file and the uv pin, so any change here rebuilds it):
#
#   deploy/image/rootfs.sh WORKDIR UV_VERSION
#
# writes WORKDIR/rootfs.tar, a minimal Debian bookworm from the mirror this machine's apt
# already uses (mmdebstrap, variant essential, merged /usr, documentation left out) with the
# packages below and the user omniforge (uid 10001), and WORKDIR/uv/bin/uv, uv from PyPI as the
# server installs it (pip, the pinned version).
set -euo pipefail
log() { printf 'image: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }
work=${1:?WORKDIR} UV_VERSION=${2:?UV_VERSION}

PACKAGES=(bubblewrap python3 ca-certificates tini)

# The bookworm entries of this machine's apt sources (the Debian mirror it already uses).
sources_file() {
  if [[ -n ${OMNIFORGE_IMAGE_SOURCES:-} ]]; then cat "$OMNIFORGE_IMAGE_SOURCES"; return; fi
  local f
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [[ -f $f ]] && grep -E '^deb[[:space:]]+(\[[^]]*\][[:space:]]+)?[^[:space:]]+[[:space:]]+bookworm' "$f" || true
  done
  for f in /etc/apt/sources.list.d/*.sources; do
    # deb822: keep whole stanzas whose Suites are bookworm ones.
    [[ -f $f ]] && awk 'BEGIN { RS = ""; ORS = "\n\n" } /(^|\n)Suites:[[:space:]]*bookworm/' "$f"
  done
}
sources_file >"$work/debian.sources"
[[ -s $work/debian.sources ]] || die "no bookworm entry in /etc/apt/sources.list*; set OMNIFORGE_IMAGE_SOURCES"
# The deb822 form if any stanza is deb822, else the one-line form.
if grep -q '^Types:' "$work/debian.sources"; then srcname=debian.sources; else mv "$work/debian.sources" "$work/debian.list"; srcname=debian.list; fi


# Leave out what a server never reads: documentation, manual pages, locales, apt's lists.
# merged-usr: the /usr merge by mmdebstrap's own hook, not the usrmerge package (which pulls in
# perl, 45 MB). force-unsafe-io: no fsync per file; a crash only fails this build.
mmdebstrap --variant=essential --mode=root --quiet \
  --hook-dir=/usr/share/mmdebstrap/hooks/merged-usr --dpkgopt=force-unsafe-io \
  --include="$(IFS=,; echo "${PACKAGES[*]}")" \
  --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-include=/usr/share/doc/*/copyright' \
  --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/info/*' \
  --dpkgopt='path-exclude=/usr/share/locale/*' --dpkgopt='path-exclude=/usr/share/lintian/*' \
  --customize-hook='echo "omniforge:x:10001:10001:OmniForge:/var/lib/omniforge:/usr/sbin/nologin" >>"$1/etc/passwd"' \
  --customize-hook='echo "omniforge:x:10001:" >>"$1/etc/group" && echo "omniforge:!:20000::::::" >>"$1/etc/shadow"' \
  --customize-hook='mkdir -p "$1/var/lib/omniforge" && chown 10001:10001 "$1/var/lib/omniforge" && chmod 0750 "$1/var/lib/omniforge"' \
  --customize-hook='rm -rf "$1"/var/cache/* "$1"/var/lib/apt/lists/* "$1"/var/log/*.log "$1"/tmp/*' \
  bookworm "$work/rootfs.tar" "$work/$srcname"
# uv from PyPI, as the server installs it (pip, the pinned version): only its binary is kept.
pip=${OMNIFORGE_IMAGE_PIP:-}
if [[ -z $pip ]]; then
  python3 -m venv "$work/pip" || die "python3 -m venv failed: install python3-venv or set OMNIFORGE_IMAGE_PIP"
  pip=$work/pip/bin/python
fi
"$pip" -m pip install --quiet --disable-pip-version-check --no-input --no-deps --only-binary :all: \
  --target "$work/uv" "uv==$UV_VERSION"
[[ -x $work/uv/bin/uv ]] || die "pip did not install the uv binary"
