#!/usr/bin/env bash
# Packs the Debian 12 packages that mpdist needs to build, test and train (Open MPI, HDF5,
# libconfig, cmocka, OpenBLAS, cJSON, zlib, pkg-config, the HDF5 tools and the Fashion-MNIST data)
# as .deb files into DIR, for tests/gpu/run.sh to unpack on a GPU machine that has no network and
# no Debian packages beyond its image. Run it on a networked Debian 12 machine; it installs
# nothing and writes only to DIR, a temporary directory and .git/info/exclude (so that git ignores
# DIR). See tests/gpu/README.md.
#
# Usage: tests/gpu/pack-deps.sh [DIR]        (DIR defaults to .gpu-deps in the repository root)
#   MPDIST_GPU_DATA=0       leave out the Fashion-MNIST data package (31 MB)
#   MPDIST_GPU_EXTRA        more packages to pack even if the image is assumed to have them, e.g.
#                           "libudev1" when run.sh reports libudev.so.1 missing on the GPU machine
#   MPDIST_DEBIAN_MIRROR    Debian mirror (default http://deb.debian.org/debian)
#
# Which packages: apt resolves the dependencies against a private APT state (its own sources,
# lists, cache and dpkg status file under a temporary directory, so the machine's own APT state is
# neither used nor locked; only the final check asks ldconfig and dpkg -S which package owns a
# library). The status file pretends that the GPU machine's image is
# installed: the closure of Debian's Essential/Priority: required packages plus gcc, g++ and make
# (what any image with a working gcc has: libc6, libc6-dev, libstdc++6, libssl3, ...), and the
# packages in skip below, which the build and tests do not need. `apt-get install --download-only` then
# fetches exactly the missing rest. Each pretended package gets version 999 with no dependencies,
# and one extra package provides all of them at their real versions, which satisfies both ">="
# and "=" dependencies. zlib1g (zlib1g-dev's libz.so points into it) and MPDIST_GPU_EXTRA stay out
# of the status file, so they are packed.
# libevent comes from Debian 11: Debian 12's libevent_core calls arc4random (glibc 2.36), which
# Ubuntu 22.04 (glibc 2.35) lacks; both are builds of upstream 2.1.12.
#
# Trimming: each package is unpacked with dpkg-deb -R, stripped of what the build and tests do not
# use (documentation except copyright files, man pages, static libraries, Fortran and OpenSHMEM
# parts of Open MPI, its plugins for network stacks not packed here, the reference BLAS/LAPACK
# copies beside libopenblas), given the symlinks its postinst would make with update-alternatives
# (mpirun, mpiexec, mpicc, openblas.pc, ...), and rebuilt. Every ELF file's needed libraries must
# then be packed or part of the image above, else the script fails.
set -euo pipefail
case "${1:-}" in -h | --help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0 ;; esac

cd "$(dirname "$0")/../.."
root=$PWD
dir=${1:-.gpu-deps}
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
mirror=${MPDIST_DEBIAN_MIRROR:-http://deb.debian.org/debian}
security=${mirror%/debian}/debian-security

die() { echo "pack-deps: $*" >&2; exit 1; }

for tool in apt-get apt-cache dpkg-deb dpkg objdump ldconfig awk; do
  command -v "$tool" >/dev/null || die "$tool not found (run this on a Debian 12 machine with binutils)"
done
grep -q '^VERSION_CODENAME=bookworm' /etc/os-release 2>/dev/null ||
  echo "pack-deps: warning: this is not Debian 12 (bookworm); the packages come from bookworm anyway" >&2
[ -r /usr/share/keyrings/debian-archive-keyring.gpg ] ||
  die "/usr/share/keyrings/debian-archive-keyring.gpg missing (install debian-archive-keyring)"

# What the build, the tests (h5dump, h5diff, mpirun) and the training run need.
want=(libopenmpi-dev openmpi-bin libhdf5-dev hdf5-tools libcmocka-dev libconfig-dev zlib1g-dev
      libjpeg62-turbo-dev libpng-dev libopenblas-dev libcjson-dev pkgconf)
[ "${MPDIST_GPU_DATA:-1}" = 0 ] || want+=(dataset-fashion-mnist fortunes)
read -ra extra <<<"${MPDIST_GPU_EXTRA:-}"
# libunistring2 (for libidn2, under HDF5's libcurl): the Ubuntu 24.04 GPU image lacks it.
always=(zlib1g libunistring2 ${extra[@]+"${extra[@]}"})
want+=(libunistring2 ${extra[@]+"${extra[@]}"})
old_libevent=(libevent-core-2.1-7 libevent-pthreads-2.1-7)
# Dependencies the build and tests do not need: the Fortran compiler and ssh (Open MPI's -dev and
# bin), headers of Open MPI's own dependencies (mpi.h includes none of them), network stacks whose
# plugins are removed below, hwloc's optional plugins, HDF5's C++/Fortran libraries, the headers
# for linking HDF5 statically, and h5cc (CMake's FindHDF5 then searches HDF5_ROOT instead).
skip=(gfortran-12 openssh-client libjs-jquery libjs-jquery-ui libibverbs-dev libhwloc-dev
      libevent-dev libpmix-dev libucx0 libfabric1 libibverbs1 libpsm-infinipath1 libpsm2-2
      librdmacm1 libhwloc-plugins libhdf5-fortran-102 libhdf5-hl-fortran-100 libhdf5-cpp-103-1
      libhdf5-hl-cpp-100 libjpeg-dev libaec-dev libcurl4-openssl-dev libssl-dev hdf5-helpers)
# What the image is assumed to have besides Debian's required packages.
image_tools=(gcc g++ make)
# Virtual packages those provide (libjpeg62-turbo-dev depends on libc-dev, which libc6-dev provides).
image_virtual=(libc-dev)

tmp=$(mktemp -d /tmp/mpdist-pack.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp"/etc/sources.list.d "$tmp"/etc/preferences.d "$tmp"/state/lists/partial \
         "$tmp"/cache "$tmp"/archives/partial "$tmp"/stage
: >"$tmp/etc/sources.list"
: >"$tmp/empty-status"
cat >"$tmp/etc/sources.list.d/debian.sources" <<EOF
Types: deb
URIs: $mirror
Suites: bookworm bookworm-updates bullseye
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: $security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
cat >"$tmp/etc/preferences" <<'EOF'
Package: *
Pin: release n=bullseye
Pin-Priority: 100
EOF
apt_opts=(-o Dir::Etc::sourcelist="$tmp/etc/sources.list" -o Dir::Etc::sourceparts="$tmp/etc/sources.list.d"
          -o Dir::Etc::preferences="$tmp/etc/preferences" -o Dir::Etc::preferencesparts="$tmp/etc/preferences.d"
          -o Dir::State="$tmp/state" -o Dir::Cache="$tmp/cache" -o Dir::Cache::archives="$tmp/archives/"
          -o APT::Architecture=amd64 -o APT::Architectures::=amd64 -o APT::Sandbox::User=root
          -o APT::Install-Recommends=false -o APT::Install-Suggests=false)
apt_empty=("${apt_opts[@]}" -o Dir::State::status="$tmp/empty-status")
apt_image=("${apt_opts[@]}" -o Dir::State::status="$tmp/status")

echo "== apt-get update (private state in $tmp)"
apt-get "${apt_empty[@]}" -q update >"$tmp/update.log" 2>&1 ||
  { tail -5 "$tmp/update.log" >&2; die "apt-get update failed (no network, or $mirror unreachable)"; }

# Names of the packages to pretend installed: the closure of the required ones plus the tools.
mapfile -t index < <(apt-get "${apt_empty[@]}" indextargets --format "\$(FILENAME)" 'Codename: bookworm' 'Identifier: Packages')
[ ${#index[@]} -gt 0 ] || die "no bookworm package index after apt-get update"
mapfile -t required < <(/usr/lib/apt/apt-helper cat-file "${index[@]}" |
  awk -v RS= -F'\n' '{p=""; r=0; for (i = 1; i <= NF; i++) { if ($i ~ /^Package: /) p = substr($i, 10);
                      if ($i == "Priority: required" || $i == "Essential: yes") r = 1 } if (r) print p }' | sort -u)
mapfile -t image < <(apt-get "${apt_empty[@]}" -s install "${required[@]}" "${image_tools[@]}" |
                     awk '/^Inst /{print $2}')
[ ${#image[@]} -gt 50 ] || die "could not resolve the base image (${#image[@]} packages)"
mapfile -t present < <(printf '%s\n' "${image[@]}" "${skip[@]}" | grep -vxF -f <(printf '%s\n' "${always[@]}") | sort -u)

{ apt-cache "${apt_empty[@]}" show --no-all-versions "${present[@]}" 2>/dev/null || true; } |
  awk '/^Package: /{p=$2} /^Version: /{print p, $2}' >"$tmp/present-versions"
[ "$(wc -l <"$tmp/present-versions")" -ge $((${#present[@]} * 9 / 10)) ] ||
  die "could not read the versions of the base image's packages"
{
  for p in "${present[@]}"; do
    printf 'Package: %s\nStatus: install ok installed\nPriority: optional\nSection: misc\n' "$p"
    printf 'Maintainer: mpdist\nArchitecture: amd64\nVersion: 999:image\nDescription: on the GPU image\n\n'
  done
  printf 'Package: mpdist-gpu-image\nStatus: install ok installed\nPriority: optional\nSection: misc\n'
  printf 'Maintainer: mpdist\nArchitecture: amd64\nVersion: 1\nDescription: on the GPU image\nProvides: '
  awk '{printf "%s%s (= %s)", (NR > 1 ? ", " : ""), $1, $2} END {print ", " virt}' \
    virt="${image_virtual[*]}" "$tmp/present-versions"
  printf '\n'
} >"$tmp/status"

install=("${want[@]}")
if apt-cache "${apt_image[@]}" policy "${old_libevent[0]}" | grep -q 'bullseye'; then
  install+=("${old_libevent[@]/%//bullseye}")
else
  echo "pack-deps: warning: Debian 11's libevent not found; the pack needs glibc >= 2.36 (Ubuntu 24.04)" >&2
fi

echo "== resolving ${want[*]}"
apt-get "${apt_image[@]}" -s install "${install[@]}" >"$tmp/resolve.log" 2>&1 ||
  { cat "$tmp/resolve.log" >&2; die "apt could not resolve the packages"; }
echo "== downloading"
apt-get "${apt_image[@]}" -q -y --download-only install "${install[@]}" >"$tmp/download.log" 2>&1 ||
  { tail -20 "$tmp/download.log" >&2; die "download failed"; }
shopt -s nullglob
debs=("$tmp"/archives/*.deb)
[ ${#debs[@]} -gt 0 ] || die "nothing downloaded"
echo "   ${#debs[@]} packages, $(du -cb "${debs[@]}" | awk 'END {printf "%.1f MiB", $1 / 1048576}')"

# Paths (find -path patterns inside a package) that the build, tests and training do not use.
trim=('./usr/share/man/*' './usr/share/info/*' './usr/share/lintian/*' './usr/share/bug/*'
      './usr/share/doc-base/*' './usr/share/locale/*' '*.a' '*.mod'
      '*/libmpi_mpifh*' '*/libmpi_usempi*' '*/liboshmem.so*' '*/libmca_common_ucx.so*'
      '*/libmca_common_ofi.so*' '*/libmca_common_verbs.so*' '*/openmpi3/mca_atomic_*'
      '*/openmpi3/mca_memheap_*' '*/openmpi3/mca_scoll_*' '*/openmpi3/mca_spml_*'
      '*/openmpi3/mca_sshmem_*' '*/openmpi3/mca_*ucx*' '*/openmpi3/mca_*_ofi.so'
      '*/openmpi3/mca_mtl_psm*' '*/openmpi3/mca_btl_openib.so' '*/openmpi/include/mpif*.h'
      '*/pkgconfig/ompi-f*.pc' './usr/bin/mpif77*' './usr/bin/mpif90*' './usr/bin/mpifort*'
      './usr/bin/osh*' './usr/bin/shmem*' './usr/share/openmpi/mpif*' './usr/share/openmpi/osh*'
      './usr/share/openmpi/shmem*' './usr/share/openmpi/help-oshmem*' './usr/share/openmpi/help-shmem*'
      '*/openblas-pthread/libblas.so*' '*/openblas-pthread/liblapack.so*')

echo "== trimming"
mkdir -p "$tmp/meta"
for deb in "${debs[@]}"; do
  name=$(basename "$deb" .deb)
  dpkg-deb -R "$deb" "$tmp/stage/$name"
  echo 0 >"$tmp/meta/$name.bytes"
  : >"$tmp/meta/$name.links"
  case $name in dataset-fashion-mnist_* | fortunes_*) continue ;; esac
  args=(-false)
  for pattern in "${trim[@]}"; do args+=(-o -path "$pattern"); done
  (cd "$tmp/stage/$name" && find . -path ./DEBIAN -prune -o \( "${args[@]}" -o \( -path './usr/share/doc/*' \
     ! -name copyright ! -type d \) \) \( -type f -o -type l \) -print) >"$tmp/meta/$name.removed"
  (cd "$tmp/stage/$name" && xargs -r -d '\n' du -cb <"$tmp/meta/$name.removed" | awk 'END {print $1 + 0}') \
    >"$tmp/meta/$name.bytes"
  (cd "$tmp/stage/$name" && xargs -r -d '\n' rm -f <"$tmp/meta/$name.removed")
  find "$tmp/stage/$name" -mindepth 1 -depth -type d -empty -not -path "$tmp/stage/$name/DEBIAN*" -delete
done

# update-alternatives --install LINK NAME PATH PRIO [--slave LINK NAME PATH]...: make LINK a
# relative symlink to PATH inside the package whose postinst asks for it, when PATH is packed.
in_pack() { local s; for s in "$tmp"/stage/*/; do [ -e "$s$1" ] || [ -L "$s$1" ] && return 0; done; return 1; }
for deb in "${debs[@]}"; do
  name=$(basename "$deb" .deb)
  stage=$tmp/stage/$name
  [ -f "$stage/DEBIAN/postinst" ] || continue
  sed -e ':a' -e '/\\$/N; s/\\\n/ /; ta' "$stage/DEBIAN/postinst" |
    { grep -E '^\s*update-alternatives .*--install' || true; } |
    { grep -oE -- '--(install|slave)[[:space:]]+/[^[:space:]]+[[:space:]]+[^[:space:]]+[[:space:]]+/[^[:space:]]+' || true; } |
    awk '{print $2, $4}' |
    while read -r link target; do
      case "$link$target" in *'$'*) continue ;; esac
      [ -e "$stage$link" ] || [ -L "$stage$link" ] || ! in_pack "$target" || {
        mkdir -p "$(dirname "$stage$link")"
        ln -s "$(realpath -m -s --relative-to="$(dirname "$link")" "$target")" "$stage$link"
        echo "$link" >>"$tmp/meta/$name.links"
      }
    done
done

# Every needed library must be packed or on the image.
declare -A packed_names=() image_set=()
while IFS= read -r f; do packed_names[$(basename "$f")]=1; done < <(cd "$tmp/stage" && find . \( -type f -o -type l \) -not -path '*/DEBIAN/*')
for p in "${present[@]}"; do image_set[$p]=1; done
missing=0 glibc=0
ldconfig -p >"$tmp/ldcache"
while IFS= read -r -d '' f; do
  [ "$(head -c4 "$f" | od -An -c | tr -d ' ')" = '177ELF' ] || continue
  v=$(objdump -T "$f" 2>/dev/null | { grep -oE 'GLIBC_[0-9]+\.[0-9]+' || true; } | sed 's/GLIBC_//' | sort -V | tail -1)
  [ -z "$v" ] || glibc=$(printf '%s\n%s\n' "$glibc" "$v" | sort -V | tail -1)
  for so in $(objdump -p "$f" 2>/dev/null | awk '/NEEDED/{print $2}'); do
    [ -z "${packed_names[$so]:-}" ] || continue
    path=$(awk -v so="$so" '$1 == so && /x86-64/ && !found {print $NF; found = 1}' "$tmp/ldcache")
    owner=""
    [ -z "$path" ] || owner=$(dpkg -S "$path" 2>/dev/null || dpkg -S "/usr$path" 2>/dev/null ||
                              dpkg -S "$(realpath "$path")" 2>/dev/null || true)
    owner=${owner%%:*}
    if [ -z "$owner" ] || [ -z "${image_set[$owner]:-}" ]; then
      echo "pack-deps: ${f#"$tmp"/stage/} needs $so (${owner:-unknown package}), which is neither packed nor on the image" >&2
      missing=$((missing + 1))
    fi
  done
done < <(find "$tmp/stage" -type f -not -path '*/DEBIAN/*' \( -name '*.so*' -o -perm -u+x \) -print0)
[ "$missing" -eq 0 ] || die "$missing needed libraries missing; add their packages or trim the files that need them"

echo "== writing $dir"
rm -f "$dir"/*.deb "$dir/manifest.txt"
{
  echo "# mpdist GPU dependency pack: Debian 12 packages for tests/gpu/run.sh, made by tests/gpu/pack-deps.sh"
  echo "made: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "glibc-min: $glibc"
  echo "# package version deb-bytes [trimmed N bytes unpacked] [+N alternatives links]"
} >"$dir/manifest.txt"
for deb in "${debs[@]}"; do
  name=$(basename "$deb" .deb)
  stage=$tmp/stage/$name
  removed=$(cat "$tmp/meta/$name.bytes")
  links=$(wc -l <"$tmp/meta/$name.links")
  note=""
  if [ "$removed" -ge 262144 ] || [ "$links" -gt 0 ]; then
    if [ -f "$stage/DEBIAN/md5sums" ]; then
      (cd "$stage" && while read -r sum file; do if [ -e "$file" ]; then echo "$sum  $file"; fi; done \
        <DEBIAN/md5sums >DEBIAN/md5sums.new && mv DEBIAN/md5sums.new DEBIAN/md5sums)
    fi
    nice -n 19 dpkg-deb --root-owner-group -Zxz -b "$stage" "$dir/$name.deb" >/dev/null
    note=" trimmed $removed"
    [ "$links" -eq 0 ] || note="$note +$links links"
  else
    cp "$deb" "$dir/$name.deb"
  fi
  echo "$(dpkg-deb -f "$dir/$name.deb" Package Version | awk '{printf "%s ", $2}')$(stat -c %s "$dir/$name.deb")$note" >>"$dir/manifest.txt"
done

# Git ignores DIR when it is inside the repository, so that it travels only when carried.
case $dir/ in
  "$root"/*)
    rel=${dir#"$root"/}
    if ! git check-ignore -q "$rel/manifest.txt" 2>/dev/null; then
      exclude=$(git rev-parse --git-path info/exclude)
      mkdir -p "$(dirname "$exclude")"
      echo "/$rel/" >>"$exclude"
      echo "   added /$rel/ to $exclude"
    fi ;;
esac

count=$(find "$dir" -maxdepth 1 -name '*.deb' | wc -l)
bytes=$(du -cb "$dir"/* | awk 'END {print $1}')
tree=$(git ls-files -z -co --exclude-standard | du -cb --files0-from=- 2>/dev/null | awk 'END {print $1}')
mib() { awk -v b="$1" 'BEGIN {printf "%.1f MiB", b / 1048576}'; }
echo "packed: $count .deb files, $(mib "$bytes") in $dir (needs glibc >= $glibc)"
echo "carry:  $(mib "$bytes") + working tree $(mib "$tree") = $(mib $((bytes + tree))) of the 64 MiB limit"
[ $((bytes + tree)) -le $((64 * 1048576)) ] ||
  echo "pack-deps: warning: over the 64 MiB limit; MPDIST_GPU_DATA=0 leaves out the 31 MB data package" >&2
