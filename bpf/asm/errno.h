/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * libbpf's usdt.bpf.h includes <linux/errno.h>, which wants the target's
 * <asm/errno.h>; with -target bpf the multiarch include directory is not
 * searched, and x86_64's asm/errno.h is the generic one anyway.
 */
#include <asm-generic/errno.h>
