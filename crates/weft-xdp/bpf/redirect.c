// SPDX-License-Identifier: Apache-2.0
//
// weft's AF_XDP redirect: every frame received on a queue that has an AF_XDP socket in
// `weft_xsks` (keyed by receive queue index) goes to that socket; frames on any other queue
// go on to the kernel's stack as if no program were attached (the map lookup's fallback,
// XDP_PASS). Built by build.sh into redirect.o, which the crate embeds.
//
// Self-contained on purpose: only <linux/bpf.h> (linux-libc-dev), no libbpf headers. The
// map is declared the way libbpf's `__uint`/`__type` macros declare BTF-defined maps.

#include <linux/bpf.h>

#define SEC(name) __attribute__((section(name), used))
#define __uint(name, val) int (*name)[val]
#define __type(name, val) typeof(val) *name

// The helper by number (BPF_FUNC_redirect_map), as libbpf's bpf_helper_defs.h declares it.
static long (*bpf_redirect_map)(void *map, __u64 key, __u64 flags) = (void *)BPF_FUNC_redirect_map;

// Queues of one interface a socket may serve: more than any veth or NIC here has.
#define WEFT_MAX_QUEUES 256

struct {
	__uint(type, BPF_MAP_TYPE_XSKMAP);
	__uint(max_entries, WEFT_MAX_QUEUES);
	__type(key, __u32);
	__type(value, __u32);
} weft_xsks SEC(".maps");

SEC("xdp")
int weft_redirect(struct xdp_md *ctx)
{
	return bpf_redirect_map(&weft_xsks, ctx->rx_queue_index, XDP_PASS);
}

// bpf_redirect_map is not a GPL-only helper: the program carries the project's licence.
char _license[] SEC("license") = "Apache-2.0";
