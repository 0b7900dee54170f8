/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The read/write family of a syscall (x86_64 numbers), for the accounting:
 * by number at sys_enter/sys_exit (--syscalls), and from the saved user
 * registers of a thread that leaves the CPU asleep inside one.
 */
#ifndef PYSTROBE_BPF_SYSCALL_FAMILY_BPF_H_
#define PYSTROBE_BPF_SYSCALL_FAMILY_BPF_H_

#include "vmlinux.h"

#include "compat.bpf.h"

enum syscall_family {
	SYSCALL_OTHER = 0,
	SYSCALL_READ = 1,
	SYSCALL_WRITE = 2,
};

static __always_inline __u32 syscall_family(long id, __u32 *counts_bytes)
{
	*counts_bytes = 1;
	switch (id) {
	case 0:	  /* read */
	case 17:  /* pread64 */
	case 19:  /* readv */
	case 45:  /* recvfrom */
	case 47:  /* recvmsg */
	case 295: /* preadv */
	case 327: /* preadv2 */
		return SYSCALL_READ;
	case 299: /* recvmmsg: returns messages */
		*counts_bytes = 0;
		return SYSCALL_READ;
	case 1:	  /* write */
	case 18:  /* pwrite64 */
	case 20:  /* writev */
	case 40:  /* sendfile */
	case 44:  /* sendto */
	case 46:  /* sendmsg */
	case 296: /* pwritev */
	case 328: /* pwritev2 */
		return SYSCALL_WRITE;
	case 307: /* sendmmsg: returns messages */
		*counts_bytes = 0;
		return SYSCALL_WRITE;
	}
	return SYSCALL_OTHER;
}

/*
 * The read/write family of the syscall the current thread is in, from its
 * saved user registers. The syscall number's slot also holds an exception's
 * error code (a user page fault on code is 0x14, writev's number), which
 * compat_regs_from_syscall() tells apart.
 */
static __always_inline __u32 current_syscall_family(void)
{
	struct pt_regs *regs = compat_current_user_regs();
	__u32 counts_bytes;
	__u32 family;

	family = syscall_family(compat_syscall_nr(regs), &counts_bytes);
	if (family != SYSCALL_OTHER && !compat_regs_from_syscall(regs))
		return SYSCALL_OTHER;
	return family;
}

#endif /* PYSTROBE_BPF_SYSCALL_FAMILY_BPF_H_ */
