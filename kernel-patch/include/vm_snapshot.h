/* SPDX-License-Identifier: MIT */
/*
 * Userspace helper for the vm_snapshot() system call added by
 * kernel-patch/0001-mm-add-vm_snapshot-system-call.patch.
 *
 *   void *vm_snapshot(void *dst, void *src, size_t len);
 *
 * Detection: never trust the system call number alone (later kernels give
 * 451 to other calls).  The patched kernel exports
 *   /sys/kernel/mm/vm_snapshot/abi_version   ("1")
 *   /sys/kernel/mm/vm_snapshot/syscall_nr    ("451" on x86_64)
 *   /sys/kernel/mm/vm_snapshot/shared_memfd  ("1", with the second patch)
 * vm_snapshot_detect() reads both and returns the number to use, or -1.
 *
 * Header-only so that the selftests, the micro-benchmark and other C users
 * share one implementation.
 */
#ifndef ANKER_VM_SNAPSHOT_H
#define ANKER_VM_SNAPSHOT_H

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#define VM_SNAPSHOT_ABI_VERSION 1
#define VM_SNAPSHOT_SYSFS_DIR "/sys/kernel/mm/vm_snapshot"

static long vm_snapshot_nr = -1;

static inline long vm_snapshot_read_long(const char *path)
{
	FILE *f = fopen(path, "r");
	long v = -1;

	if (!f)
		return -1;
	if (fscanf(f, "%ld", &v) != 1)
		v = -1;
	fclose(f);
	return v;
}

/* Returns the syscall number, or -1 (errno = ENOSYS) if unavailable. */
static inline long vm_snapshot_detect(void)
{
	long abi, nr;

	if (vm_snapshot_nr >= 0)
		return vm_snapshot_nr;
	abi = vm_snapshot_read_long(VM_SNAPSHOT_SYSFS_DIR "/abi_version");
	nr = vm_snapshot_read_long(VM_SNAPSHOT_SYSFS_DIR "/syscall_nr");
	if (abi != VM_SNAPSHOT_ABI_VERSION || nr < 0) {
		errno = ENOSYS;
		return -1;
	}
	vm_snapshot_nr = nr;
	return nr;
}

/*
 * Memfds created with MFD_SNAPSHOT (kernel-patch/0002-...): vm_snapshot() of
 * a MAP_SHARED mapping of one gives a read-only view frozen at the call,
 * while other processes keep writing the memfd.  Other shared mappings are
 * aliased.  Detected through /sys/kernel/mm/vm_snapshot/shared_memfd ("1").
 */
#ifndef MFD_SNAPSHOT
#define MFD_SNAPSHOT 0x0020U
#endif

static inline int vm_snapshot_shared_memfd(void)
{
	return vm_snapshot_detect() >= 0 &&
	       vm_snapshot_read_long(VM_SNAPSHOT_SYSFS_DIR "/shared_memfd") == 1;
}

/*
 * Returns the address of the snapshot, or MAP_FAILED with errno set.
 * Errors: EINVAL (bad alignment/length/overlap/range), EFAULT (hole in
 * the source or, if dst != NULL, the destination range), ENOMEM,
 * EOPNOTSUPP (unsupported kind of mapping in the source), EINTR, ENOSYS;
 * for MFD_SNAPSHOT sources also EBUSY (a page is pinned, e.g. for DMA)
 * and EFAULT (the range extends beyond the end of the memfd).
 */
static inline void *vm_snapshot(void *dst, void *src, size_t len)
{
	long r;

	if (vm_snapshot_detect() < 0)
		return MAP_FAILED;
	r = syscall(vm_snapshot_nr, dst, src, len);
	if (r == -1)
		return MAP_FAILED;
	return (void *)r;
}

#endif /* ANKER_VM_SNAPSHOT_H */
