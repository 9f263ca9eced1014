#!/bin/sh
# Rebuilds redirect.o from redirect.c. The object is committed: building weft needs no C
# toolchain; run this after changing redirect.c (needs clang and linux-libc-dev, e.g.
# `apt-get install clang`), then commit both files.
set -eu
cd "$(dirname "$0")"
arch_include="/usr/include/$(uname -m)-linux-gnu"
# The source path recorded in the BTF line info is made relative to the crate.
clang -O2 -g -target bpf -I "$arch_include" -fdebug-prefix-map="$(pwd)"=bpf \
    -c redirect.c -o redirect.o
# Debug info keeps the BTF the map definition needs; the DWARF sections are not needed.
if command -v llvm-strip >/dev/null 2>&1; then
    llvm-strip --strip-debug redirect.o
fi
echo "built $(pwd)/redirect.o"
