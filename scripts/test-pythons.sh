#!/usr/bin/env bash
# The newest CPythons the tests run against, made from Debian's own packages:
#   /opt/pystrobe-test/sid     Debian unstable chroot: python3.14, python3.15 (+ -dev headers)
#   /opt/pystrobe-test/bin/python3.14, python3.15
#                              run the chroot's interpreter on this machine's files (see
#                              write_chroot_launcher), as a container would
#   /opt/pystrobe-test/3.13t   free-threaded CPython 3.13 (--disable-gil)
#   /opt/pystrobe-test/3.14t   free-threaded CPython 3.14 (--disable-gil, --enable-shared)
#   /opt/pystrobe-test/3.15t   free-threaded CPython 3.15 (--disable-gil, static libpython)
# built from the sources Debian unstable ships (its source index). Idempotent: each
# part is skipped when its stamp file says it is done. The first run takes about
# 1 minute for the chroot and about 5 minutes of CPU per free-threaded build.
#
# PYSTROBE_TEST_PYTHONS=none skips everything (the tests then name what they skip).
set -euo pipefail

root=${PYSTROBE_TEST_ROOT:-/opt/pystrobe-test}
mirror=${PYSTROBE_DEBIAN_MIRROR:-$(sed -n 's/^URIs: *\(http[^ ]*debian\)$/\1/p' \
  /etc/apt/sources.list.d/debian.sources 2>/dev/null | head -n1)}
mirror=${mirror:-http://deb.debian.org/debian}

[ "${PYSTROBE_TEST_PYTHONS:-all}" = none ] && exit 0
if [ "$(id -u)" -ne 0 ]; then
  echo "test-pythons: run as root (debootstrap and /opt need it)" >&2
  exit 1
fi
mkdir -p "$root"

log() { echo "test-pythons: $*" >&2; }

# --- Debian unstable chroot with python3.14 and python3.15 ----------------------
# The host directories the launchers bind into the chroot, so a test's scripts and
# files have the same paths inside as outside.
shared_dirs="/tmp /root /home /work"

# Undoes the launchers' mounts; always before removing the chroot, or rm -rf would
# reach through the bind mounts into this machine's own files.
unmount_chroot() {
  local dir=$1 mount
  awk -v dir="$dir/" 'index($2, dir) == 1 {print $2}' /proc/mounts | sort -r |
    while read -r mount; do umount -l "$mount"; done
}

make_chroot() {
  local dir=$root/sid
  [ -f "$dir/.pystrobe-done" ] && return 0
  unmount_chroot "$dir"
  command -v debootstrap >/dev/null || {
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap
  }
  log "debootstrap sid into $dir (about a minute)"
  # Never through a mount that is still there: it may be this machine's /root.
  rm -rf --one-file-system "$dir"
  debootstrap --variant=minbase --include=python3.14,python3.15,python3.14-dev,python3.15-dev \
    sid "$dir" "$mirror" >"$root/sid-debootstrap.log" 2>&1 || {
    tail -n 20 "$root/sid-debootstrap.log" >&2
    return 1
  }
  touch "$dir/.pystrobe-done"
}

# /opt/pystrobe-test/bin/python3.X: the chroot's interpreter with this machine's
# /tmp, /root, /home and /work bound in at the same paths, started in the
# caller's working directory. It execs all the way down, so the pid a test
# starts is the interpreter's, seen from outside through /proc/PID/root.
write_chroot_launcher() {
  local version=$1 sid=$root/sid
  mkdir -p "$root/bin"
  cat >"$root/bin/python$version" <<LAUNCHER
#!/bin/sh
# Written by pystrobe's scripts/test-pythons.sh: python$version of $sid.
set -e
sid=$sid
# Also the top folder of the working directory and of every absolute path
# argument (a CI clone may live anywhere), but never one of the system's own.
top_of() {
  case "\$1" in
    /proc*|/sys*|/dev*|/usr*|/bin*|/sbin*|/lib*|/etc*|/var*|/opt*|/boot*|/run*|/srv*|/mnt*) ;;
    /?*) echo "/\$(echo "\$1" | cut -d/ -f2)" ;;
  esac
}
tops=
for a in "\$PWD" "\$@"; do tops="\$tops \$(top_of "\$a")"; done
# Recursively, with the mounts below each folder (a CI clone may sit on a mount of
# its own under /check), and as a slave, so that nothing done inside reaches out.
bind() {
  mkdir -p "\$sid\$1"
  mount --rbind "\$1" "\$sid\$1" && mount --make-rslave "\$sid\$1"
}
for d in $shared_dirs \$tops; do
  [ -d "\$d" ] || continue
  mountpoint -q "\$sid\$d" || bind "\$d"
done
# A folder bound before a mount appeared under it lacks that mount: bind it again.
for a in "\$PWD" "\$@"; do
  d=\$(top_of "\$a")
  if [ -n "\$d" ] && [ -e "\$a" ] && [ ! -e "\$sid\$a" ]; then
    umount -l "\$sid\$d" 2>/dev/null || true
    bind "\$d"
  fi
done
mountpoint -q "\$sid/proc" || mount -t proc proc "\$sid/proc"
exec chroot "\$sid" /bin/sh -c 'cd "\$0" 2>/dev/null || cd /; exec /usr/bin/python$version "\$@"' "\$PWD" "\$@"
LAUNCHER
  chmod +x "$root/bin/python$version"
}

# --- free-threaded CPython from Debian's source packages --------------------------
# The newest orig tarball of `package` that the mirror serves. The source indexes of
# sid, forky and trixie name the newest upload, but a mirror may not serve that file
# yet (or any more), while it still keeps older uploads' tarballs: so after the
# indexed files, walk down from the newest indexed release (3.14.10, 3.14.9, ...,
# 3.14.0, then 3.14.0~rc3 to ~rc1) and take the first that downloads.
fetch_source() {
  local package=$1 dest=$2 suite index dir= file files= newest= version
  for suite in sid forky trixie; do
    index=$root/Sources-$suite
    find "$index" -mtime +0 -delete 2>/dev/null || true  # a day old: read it again
    if [ ! -s "$index" ]; then
      curl -fsSL "$mirror/dists/$suite/main/source/Sources.xz" | xz -d >"$index.tmp" &&
        mv "$index.tmp" "$index" || continue
    fi
    dir=${dir:-$(awk -v p="Package: $package" '$0 == p {on = 1} on && /^Directory:/ {print $2; exit}' "$index")}
    files="$files $(awk -v p="Package: $package" '$0 == p {on = 1} /^$/ {on = 0}
      on && /orig\.tar\.xz$/ {print $3}' "$index")"
  done
  [ -n "$dir" ] || return 1
  for file in $files; do
    version=${file#"${package}_"}
    version=${version%.orig.tar.xz}
    newest=$(printf '%s\n' "$newest" "$version" | sort -V | tail -n 1)
  done
  local minor=${newest%.*} patch=${newest##*.} rc
  patch=${patch%%~*}
  if [ -n "$newest" ]; then
    for ((; patch >= 0; patch--)); do files="$files ${package}_$minor.$patch.orig.tar.xz"; done
    for rc in 3 2 1; do files="$files ${package}_$minor.0~rc$rc.orig.tar.xz"; done
  fi
  mkdir -p "$dest"
  for file in $(printf '%s\n' $files | awk '!seen[$0]++'); do
    if curl -fsSL "$mirror/$dir/$file" 2>/dev/null | tar -xJ -C "$dest" --strip-components=1 2>/dev/null; then
      log "$package: $file"
      return 0
    fi
    rm -rf "$dest" && mkdir -p "$dest"
  done
  log "$package: no orig tarball of $dir downloads from $mirror (tried$files)"
  rm -rf "$dest"
  return 1
}

build_free_threaded() {
  local version=$1 shared=$2
  local prefix=$root/${version}t
  [ -x "$prefix/bin/python${version}t" ] && [ -f "$prefix/.pystrobe-done" ] && return 0
  local src=$root/src-$version
  rm -rf "$src" "$prefix"
  fetch_source "python$version" "$src" || {
    log "no source of python$version can be downloaded: free-threaded ${version}t not built"
    return 1
  }
  log "building free-threaded CPython $version (about 5 minutes of CPU)"
  local shared_flag=()
  [ "$shared" = shared ] && shared_flag=(--enable-shared "LDFLAGS=-Wl,-rpath,$prefix/lib")
  (
    cd "$src"
    ./configure --prefix="$prefix" --disable-gil --without-ensurepip --disable-test-modules \
      "${shared_flag[@]}" >"$root/build-$version.log" 2>&1
    nice make -j"$(nproc)" >>"$root/build-$version.log" 2>&1
    make install >>"$root/build-$version.log" 2>&1
  ) || {
    tail -n 30 "$root/build-$version.log" >&2
    return 1
  }
  "$prefix/bin/python${version}t" -c 'import sys; assert not sys._is_gil_enabled()'
  touch "$prefix/.pystrobe-done"
  rm -rf "$src"
}

ensure_build_deps() {
  local need=()
  for p in build-essential libffi-dev zlib1g-dev libssl-dev xz-utils; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || need+=("$p")
  done
  if [ ${#need[@]} -gt 0 ]; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}"
  fi
}

# A free-threaded build that cannot be made is named, and the tests then skip it by
# name; the chroot is needed by every test of 3.14 and 3.15, so its failure is fatal.
make_chroot
write_chroot_launcher 3.14
write_chroot_launcher 3.15
ensure_build_deps
status=0
build_free_threaded 3.13 static || status=$?
build_free_threaded 3.14 shared || status=$?
build_free_threaded 3.15 static || status=$?
[ $status -eq 0 ] || log "free-threaded builds missing: the tests name them as skipped"
exit 0
