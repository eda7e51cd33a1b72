// SPDX-License-Identifier: GPL-2.0
/*
 * Selftests of vm_snapshot() over MAP_SHARED mappings of a memfd created
 * with MFD_SNAPSHOT (0002-mm-vm_snapshot-frozen-snapshots-of-shared-memfds):
 * the snapshot keeps the contents of the moment of the call while other
 * processes write the memfd through their own mappings, write(2), hole
 * punching and truncation.  Every case runs in its own child (common.h);
 * any SIGBUS or SIGSEGV fails it.
 */
#include "common.h"

#include <sys/uio.h>

#ifndef MFD_SNAPSHOT
#define MFD_SNAPSHOT 0x0020U
#endif
#ifndef MADV_PAGEOUT
#define MADV_PAGEOUT 21
#endif
#ifndef __NR_io_uring_setup
#define __NR_io_uring_setup 425
#define __NR_io_uring_register 427
#endif

static int snap_memfd(size_t len)
{
	int fd = memfd_create("vmsnap-shared", MFD_SNAPSHOT);

	REQUIRE(fd >= 0, "memfd_create(MFD_SNAPSHOT): %s", strerror(errno));
	REQUIRE(ftruncate(fd, len) == 0, "ftruncate: %s", strerror(errno));
	return fd;
}

static char *map_fd(int fd, size_t len)
{
	char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);

	REQUIRE(p != MAP_FAILED, "mmap memfd: %s", strerror(errno));
	return p;
}

/* A snapshot of [src, src + len) that must succeed. */
static char *take(char *src, size_t len)
{
	char *s = snap(NULL, src, len);

	REQUIRE(s != MAP_FAILED, "snapshot: %s", strerror(errno));
	return s;
}

/* Run fn(arg) in a child process that maps fd itself; wait for it. */
static void in_other_process(int fd, size_t len,
			     void (*fn)(char *p, size_t len, long arg), long arg)
{
	pid_t pid = fork();
	int status;

	REQUIRE(pid >= 0, "fork");
	if (pid == 0) {
		char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED,
			       fd, 0);

		if (p == MAP_FAILED)
			_exit(2);
		fn(p, len, arg);
		_exit(0);
	}
	REQUIRE(waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
		WEXITSTATUS(status) == 0, "child failed: status %#x", status);
}

static void fill_fn(char *p, size_t len, long seed)
{
	fill(p, len, seed);
}

static void test_detect_shared(void)
{
	int fd;

	CHECK(read_file_long(VM_SNAPSHOT_SYSFS_DIR "/shared_memfd") == 1,
	      "shared_memfd attribute");
	CHECK(vm_snapshot_shared_memfd(), "vm_snapshot_shared_memfd()");
	errno = 0;
	fd = memfd_create("x", MFD_SNAPSHOT | MFD_HUGETLB);
	CHECK(fd < 0 && errno == EINVAL, "MFD_HUGETLB refused: %d %s", fd,
	      strerror(errno));
	fd = memfd_create("x", MFD_SNAPSHOT | MFD_CLOEXEC | MFD_ALLOW_SEALING);
	CHECK(fd >= 0, "with other flags: %s", strerror(errno));
}

/* Another process writes through its own MAP_SHARED mapping. */
static void test_other_process_writes(void)
{
	size_t len = 256 * PAGE_SZ;
	int fd = snap_memfd(len);
	char *src = map_fd(fd, len), *s;

	fill(src, len, 1);
	s = take(src, len);
	CHECK(!strcmp(perms_of(s), "r--p"), "perms %s", perms_of(s));
	CHECK(check(s, len, 1) == -1, "content");
	in_other_process(fd, len, fill_fn, 2);
	CHECK(check(src, len, 2) == -1, "the write reached the memfd");
	CHECK(check(s, len, 1) == -1, "snapshot frozen");
	/* and this process, through the source mapping */
	fill(src, len / 2, 3);
	CHECK(check(s, len, 1) == -1, "snapshot frozen (own writes)");
	CHECK(write_faults(s), "snapshot is read-only");
	CHECK(munmap(s, len) == 0, "munmap");
	CHECK(check(src, len / 2, 3) == -1, "source intact after munmap");
}

/* A mapping made before and one made after the call. */
static void test_mappings_before_and_after(void)
{
	size_t len = 64 * PAGE_SZ;
	int fd = snap_memfd(len);
	char *a = map_fd(fd, len), *b, *s;

	fill(a, len, 10);
	s = snap(NULL, a, len);
	REQUIRE(s != MAP_FAILED, "snapshot: %s", strerror(errno));
	b = map_fd(fd, len);
	fill(b, len, 11);
	CHECK(check(a, len, 11) == -1, "shared mappings agree");
	CHECK(check(s, len, 10) == -1, "snapshot frozen");
}

/* write(2), pwritev(2) and the page cache. */
static void test_write_syscall(void)
{
	size_t len = 32 * PAGE_SZ;
	int fd = snap_memfd(len);
	char *src = map_fd(fd, len), *s, *buf = map_rw(len);

	fill(src, len, 20);
	s = take(src, len);
	fill(buf, len, 21);
	REQUIRE(pwrite(fd, buf, len, 0) == (ssize_t)len, "pwrite");
	CHECK(check(src, len, 21) == -1, "pwrite reached the mapping");
	CHECK(check(s, len, 20) == -1, "snapshot frozen after pwrite");
	/* unaligned, across pages */
	REQUIRE(pwrite(fd, buf, PAGE_SZ, PAGE_SZ / 2) == (ssize_t)PAGE_SZ,
		"pwrite");
	CHECK(check(s, len, 20) == -1, "snapshot frozen (unaligned)");
}

/* Snapshots of a range with holes; writes fill them later. */
static void test_holes(void)
{
	size_t len = 64 * PAGE_SZ;
	int fd = snap_memfd(len);
	char *src = map_fd(fd, len), *s;

	fill(src + 8 * PAGE_SZ, PAGE_SZ, 30);
	s = take(src, len);
	CHECK(all_zero(s, 8 * PAGE_SZ), "hole reads zero");
	CHECK(check(s + 8 * PAGE_SZ, PAGE_SZ, 30) == -1, "written page");
	fill(src, len, 31);
	CHECK(all_zero(s, 8 * PAGE_SZ) &&
	      all_zero(s + 9 * PAGE_SZ, len - 9 * PAGE_SZ),
	      "holes stay zero in the snapshot");
	CHECK(check(s + 8 * PAGE_SZ, PAGE_SZ, 30) == -1, "written page");
}

/*
 * A large sparse memfd, as anker's arena is: pages reserved with fallocate
 * and never written read as zero, and a snapshot costs what is held.
 */
static void test_sparse(void)
{
	size_t len = 1UL << 30, i;
	int fd = snap_memfd(len);
	char *src = map_fd(fd, len), *s;
	double t0;

	REQUIRE(fallocate(fd, 0, 0, 64 << 20) == 0, "fallocate");
	for (i = 0; i < 16; i++)
		fill(src + (i << 24), PAGE_SZ, 35 + i);
	t0 = now_sec();
	s = take(src, len);
	NOTE("1 GB memfd, 16 pages written: snapshot in %.3f ms",
	     (now_sec() - t0) * 1e3);
	for (i = 0; i < 16; i++)
		fill(src + (i << 24), PAGE_SZ, 60 + i);
	for (i = 0; i < 16; i++) {
		CHECK(check(s + (i << 24), PAGE_SZ, 35 + i) == -1, "page %zu", i);
		CHECK(all_zero(s + (i << 24) + PAGE_SZ, PAGE_SZ),
		      "fallocated page %zu reads zero", i);
	}
	CHECK(all_zero(s + (100 << 20), PAGE_SZ), "hole reads zero");
	fill(src + (100 << 20), PAGE_SZ, 77);
	CHECK(all_zero(s + (100 << 20), PAGE_SZ), "hole stays zero");
}

/* Hole punching (the arena's way of freeing pages) and truncation. */
static void test_punch_and_truncate(void)
{
	size_t len = 64 * PAGE_SZ;
	int fd = snap_memfd(len);
	char *src = map_fd(fd, len), *s;

	fill(src, len, 40);
	s = take(src, len);
	/* whole pages, then a range with partial pages at both ends */
	REQUIRE(fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
			  4 * PAGE_SZ, 8 * PAGE_SZ) == 0, "punch");
	REQUIRE(fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
			  20 * PAGE_SZ + 100, 3 * PAGE_SZ) == 0, "punch");
	REQUIRE(madvise(src + 30 * PAGE_SZ, 2 * PAGE_SZ, MADV_REMOVE) == 0,
		"MADV_REMOVE");
	CHECK(all_zero(src + 4 * PAGE_SZ, 8 * PAGE_SZ), "punched pages zero");
	CHECK(all_zero(src + 20 * PAGE_SZ + 100, 3 * PAGE_SZ),
	      "punched range zero");
	CHECK(check(s, len, 40) == -1, "snapshot frozen after punches");
	/* refill the holes, then shrink the file to a partial page */
	fill(src, 32 * PAGE_SZ, 41);
	REQUIRE(ftruncate(fd, 10 * PAGE_SZ + 123) == 0, "ftruncate");
	CHECK(check(s, len, 40) == -1, "snapshot frozen after truncate");
	REQUIRE(ftruncate(fd, len) == 0, "ftruncate");
	CHECK(all_zero(src + 10 * PAGE_SZ + 128, len - 10 * PAGE_SZ - 128),
	      "truncated tail zero");
	CHECK(check(s, len, 40) == -1, "snapshot frozen after regrow");
}

/* Several snapshots of one range, each of its own moment. */
static void test_many_snapshots(void)
{
	enum { N = 16 };
	size_t len = 128 * PAGE_SZ;
	int fd = snap_memfd(len), i, j;
	char *src = map_fd(fd, len), *s[N];

	for (i = 0; i < N; i++) {
		fill(src, len, 50 + i);
		s[i] = snap(NULL, src, len);
		REQUIRE(s[i] != MAP_FAILED, "snapshot %d: %s", i,
			strerror(errno));
		/* every other round, a write from another process */
		if (i & 1)
			in_other_process(fd, len, fill_fn, 100 + i);
	}
	for (i = 0; i < N; i++)
		CHECK(check(s[i], len, 50 + i) == -1, "snapshot %d", i);
	/* drop every other one, write again, check the rest */
	for (i = 0; i < N; i += 2)
		munmap(s[i], len);
	fill(src, len, 99);
	for (j = 1; j < N; j += 2)
		CHECK(check(s[j], len, 50 + j) == -1, "snapshot %d", j);
}

/* Partial munmap and mremap of a snapshot; refusals on it. */
static void test_snapshot_vma_ops(void)
{
	size_t len = 32 * PAGE_SZ;
	int fd = snap_memfd(len);
	char *src = map_fd(fd, len), *s, *m;

	fill(src, len, 60);
	s = take(src, len);
	errno = 0;
	CHECK(mprotect(s, len, PROT_READ | PROT_WRITE) == -1 &&
	      errno == EACCES, "mprotect(PROT_WRITE): %s", strerror(errno));
	errno = 0;
	CHECK(madvise(s, len, MADV_DONTNEED) == -1 && errno == EINVAL,
	      "MADV_DONTNEED: %s", strerror(errno));
	EXPECT_ERR(snap(NULL, s, len), EOPNOTSUPP);
	CHECK(munmap(s + 8 * PAGE_SZ, 8 * PAGE_SZ) == 0, "partial munmap");
	m = map_rw(16 * PAGE_SZ);	/* the place to move to */
	m = mremap(s + 16 * PAGE_SZ, 16 * PAGE_SZ, 16 * PAGE_SZ,
		   MREMAP_MAYMOVE | MREMAP_FIXED, m);
	REQUIRE(m != MAP_FAILED, "mremap: %s", strerror(errno));
	errno = 0;
	CHECK(mremap(m, 16 * PAGE_SZ, 32 * PAGE_SZ, MREMAP_MAYMOVE) ==
	      MAP_FAILED && errno == EFAULT, "growing refused: %s",
	      strerror(errno));
	fill(src, len, 61);
	CHECK(check(s, 8 * PAGE_SZ, 60) == -1, "first piece frozen");
	CHECK(check_off(m, 16 * PAGE_SZ, 60, 16 * PAGE_SZ) == -1,
	      "moved piece frozen");
	/* beyond the end of the file */
	m = mmap(NULL, 2 * len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	REQUIRE(m != MAP_FAILED, "mmap");
	EXPECT_ERR(snap(NULL, m, 2 * len), EFAULT);
	/* a memfd without MFD_SNAPSHOT is still aliased */
	{
		int fd2 = memfd_create("plain", 0);
		char *p, *a;

		REQUIRE(fd2 >= 0 && ftruncate(fd2, len) == 0, "memfd");
		p = map_fd(fd2, len);
		fill(p, len, 62);
		a = snap(NULL, p, len);
		REQUIRE(a != MAP_FAILED, "snapshot");
		fill(p, len, 63);
		CHECK(check(a, len, 63) == -1, "plain memfd aliased");
	}
}

/* A dirty PTE made writable again by mprotect() without a fault. */
static void test_mprotect_upgrade(void)
{
	size_t len = 16 * PAGE_SZ;
	int fd = snap_memfd(len);
	char *src = map_fd(fd, len), *s;

	fill(src, len, 70);
	s = take(src, len);
	REQUIRE(mprotect(src, len, PROT_READ) == 0, "mprotect");
	REQUIRE(mprotect(src, len, PROT_READ | PROT_WRITE) == 0, "mprotect");
	fill(src, len, 71);
	CHECK(check(s, len, 70) == -1, "snapshot frozen");
}

/* The holder forks: the child has no snapshot; the parent's stays. */
static void test_fork_holder(void)
{
	size_t len = 16 * PAGE_SZ;
	int fd = snap_memfd(len), status;
	char *src = map_fd(fd, len), *s;
	pid_t pid;

	fill(src, len, 80);
	s = take(src, len);
	pid = fork();
	REQUIRE(pid >= 0, "fork");
	if (pid == 0) {
		fill(src, len, 81);
		_exit(read_faults(s) ? 0 : 1);
	}
	REQUIRE(waitpid(pid, &status, 0) == pid, "wait");
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0,
	      "the child has no snapshot (status %#x)", status);
	CHECK(check(src, len, 81) == -1, "the child's write");
	CHECK(check(s, len, 80) == -1, "snapshot frozen");
}

/* Pages swapped out before the call, and reclaim while it lives. */
static void test_swap(void)
{
	size_t len = 256 * PAGE_SZ, i, resident;
	int fd = snap_memfd(len), tries;
	char *src = map_fd(fd, len), *s;
	unsigned char vec[256];

	REQUIRE(meminfo_kb("SwapTotal") > 0, "no swap configured");
	fill(src, len, 90);
	for (tries = 0; tries < 10; tries++) {
		madvise(src, len, MADV_PAGEOUT);
		REQUIRE(mincore(src, len, vec) == 0, "mincore");
		for (resident = 0, i = 0; i < 256; i++)
			resident += vec[i] & 1;
		if (resident < 128)
			break;
		usleep(1000);
	}
	NOTE("%zu of 256 pages resident after MADV_PAGEOUT", resident);
	CHECK(resident < 128, "pages swapped out");
	s = take(src, len);
	CHECK(check(s, len, 90) == -1, "content read back from swap");
	/* reclaim cannot take the pages a snapshot holds: it must not tear */
	madvise(src, len, MADV_PAGEOUT);
	CHECK(check(s, len, 90) == -1, "snapshot after MADV_PAGEOUT");
	fill(src, len, 91);
	madvise(src, len, MADV_PAGEOUT);
	CHECK(check(s, len, 90) == -1, "snapshot frozen");
	CHECK(check(src, len, 91) == -1, "source after swap");
}

/*
 * Compaction migrates the memfd's pages: a page a snapshot holds stays
 * where it is (its extra reference makes migration skip it), the others
 * move; nothing tears.
 */
static void test_compaction(void)
{
	size_t len = 1024 * PAGE_SZ;
	int fd = snap_memfd(len);
	char *src = map_fd(fd, len), *s;

	fill(src, len, 93);
	s = take(src, len);
	fill(src, len / 2, 94);
	write_file("/proc/sys/vm/compact_memory", "1");
	CHECK(check(s, len, 93) == -1, "snapshot after compaction");
	CHECK(check(src, len / 2, 94) == -1, "source after compaction");
	fill(src, len, 95);
	write_file("/proc/sys/vm/compact_memory", "1");
	CHECK(check(s, len, 93) == -1, "snapshot frozen");
	CHECK(check(src, len, 95) == -1, "source");
}

/* Pages pinned for DMA may be written behind the kernel's back. */
static void test_pinned(void)
{
	size_t len = 4 * PAGE_SZ;
	int fd = snap_memfd(len), ring;
	char *src = map_fd(fd, len);
	struct iovec iov = { .iov_base = src, .iov_len = PAGE_SZ };
	struct { uint32_t a[30]; } params;

	fill(src, len, 95);
	memset(&params, 0, sizeof(params));
	ring = syscall(__NR_io_uring_setup, 4, &params);
	REQUIRE(ring >= 0, "io_uring_setup: %s", strerror(errno));
	/* IORING_REGISTER_BUFFERS: io_uring takes shmem and anonymous memory */
	if (syscall(__NR_io_uring_register, ring, 0, &iov, 1) == 0) {
		EXPECT_ERR(snap(NULL, src, len), EBUSY);
	} else {
		NOTE("io_uring refused the buffer (%s): no pin", strerror(errno));
		CHECK(errno == EOPNOTSUPP, "refused with %s", strerror(errno));
		CHECK(snap(NULL, src, len) != MAP_FAILED, "snapshot");
	}
	close(ring);
}

/*
 * Writers in other processes stamp a generation into the first and the
 * last word of every page, in page order, without pause; snapshots are
 * taken meanwhile.  A snapshot of one instant shows, in store order, a run
 * of generation g followed by a run of g - 1, and never changes later.
 */
static void stamp_fn(char *p, size_t len, long seconds)
{
	double end = now_sec() + seconds;
	uint64_t g;
	size_t i;

	for (g = 1; now_sec() < end; g++)
		for (i = 0; i < len; i += PAGE_SZ) {
			((volatile uint64_t *)(p + i))[0] = g;
			((volatile uint64_t *)(p + i + PAGE_SZ))[-1] = g;
		}
}

static bool check_cut(const char *s, size_t len, uint64_t *first)
{
	uint64_t prev = 0, v, g = ((const uint64_t *)s)[0];
	size_t i;
	int k;

	*first = g;
	for (i = 0; i < len; i += PAGE_SZ)
		for (k = 0; k < 2; k++) {
			v = k ? ((const uint64_t *)(s + i + PAGE_SZ))[-1] :
				((const uint64_t *)(s + i))[0];
			if (v > g || v + 1 < g || (i + k && v > prev)) {
				printf("#   page %zu word %d: %" PRIu64
				       " after %" PRIu64 " (first %" PRIu64
				       ")\n", i / PAGE_SZ, k, v, prev, g);
				return false;
			}
			prev = v;
		}
	return true;
}

static void test_concurrent_writer(void)
{
	enum { NSNAP = 40 };
	size_t len = 256 * PAGE_SZ;
	int fd = snap_memfd(len), i, status, bad = 0;
	char *src = map_fd(fd, len), *s[NSNAP], *copy = map_rw(len);
	uint64_t g, last = 0;
	pid_t pid;

	pid = fork();
	REQUIRE(pid >= 0, "fork");
	if (pid == 0) {
		stamp_fn(src, len, 4);
		_exit(0);
	}
	usleep(20000);
	for (i = 0; i < NSNAP; i++) {
		s[i] = snap(NULL, src, len);
		REQUIRE(s[i] != MAP_FAILED, "snapshot %d: %s", i,
			strerror(errno));
		if (!check_cut(s[i], len, &g))
			bad++;
		CHECK(g >= last, "snapshots in order (%" PRIu64 " < %" PRIu64
		      ")", g, last);
		last = g;
		if (i == NSNAP / 2)
			memcpy(copy, s[i], len);
		usleep(50000);
	}
	CHECK(!bad, "%d snapshots were not of one instant", bad);
	CHECK(last > 1, "the writer made progress (generation %" PRIu64 ")",
	      last);
	CHECK(!memcmp(copy, s[NSNAP / 2], len), "snapshot changed later");
	REQUIRE(waitpid(pid, &status, 0) == pid, "wait");
	for (i = 0; i < NSNAP; i++)
		CHECK(check_cut(s[i], len, &g), "snapshot %d after the run", i);
}

/*
 * Holders and writers exit; memory goes back.  Each round copies 6 MB into
 * snapshots; a leak of them would show after 8 rounds as 48 MB.  (Per-CPU
 * page lists and slabs make MemFree move by a few MB: one round first.)
 */
static void test_exit_and_accounting(void)
{
	size_t len = 1024 * PAGE_SZ;
	long free0 = 0, shmem0 = 0, free1, shmem1;
	int round;

	for (round = 0; round < 9; round++) {
		if (round == 1) {
			usleep(100000);
			free0 = meminfo_kb("MemFree");
			shmem0 = meminfo_kb("Shmem");
		}
		int fd = snap_memfd(len), status;
		char *src = map_fd(fd, len);
		pid_t pid;

		fill(src, len, 110);
		pid = fork();
		REQUIRE(pid >= 0, "fork");
		if (pid == 0) {
			/* the holder: snapshots, then exits holding them */
			char *s1 = snap(NULL, src, len), *s2;

			if (s1 == MAP_FAILED)
				_exit(2);
			fill(src, len / 2, 111);
			s2 = snap(NULL, src, len);
			if (s2 == MAP_FAILED || check(s1, len, 110) != -1)
				_exit(3);
			_exit(0);
		}
		REQUIRE(waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
			WEXITSTATUS(status) == 0, "holder %#x", status);
		/* a writer that exits while a snapshot copies its pages */
		{
			char *s = snap(NULL, src, len);

			REQUIRE(s != MAP_FAILED, "snapshot");
			in_other_process(fd, len, fill_fn, 112);
			CHECK(check_off(s, len / 2, 111, 0) == -1,
			      "snapshot frozen");
			munmap(s, len);
		}
		munmap(src, len);
		close(fd);
	}
	/* files of exited processes are released by a work item */
	for (round = 0; round < 20; round++) {
		usleep(100000);
		free1 = meminfo_kb("MemFree");
		shmem1 = meminfo_kb("Shmem");
		if (shmem1 <= shmem0 + 1024 && free1 >= free0 - 8192)
			break;
	}
	NOTE("MemFree %ld -> %ld kB, Shmem %ld -> %ld kB", free0, free1,
	     shmem0, shmem1);
	CHECK(shmem1 <= shmem0 + 1024, "Shmem back to baseline");
	CHECK(free1 >= free0 - 8192, "MemFree back to baseline");
}

/*
 * Random operations against a model: each live snapshot's expected
 * contents are a copy taken, single-threaded, at its creation.
 */
static void test_fuzz(void)
{
	enum { NPAGES = 48, NSNAP = 6, STEPS = 3000 };
	size_t len = NPAGES * PAGE_SZ;
	int fd = snap_memfd(len), step, i;
	char *src = map_fd(fd, len), *s[NSNAP] = { 0 }, *model[NSNAP];
	char *buf = map_rw(PAGE_SZ * 4);
	unsigned int seed = 12345;

	for (i = 0; i < NSNAP; i++)
		model[i] = map_rw(len);
	for (step = 0; step < STEPS; step++) {
		int op = rand_r(&seed) % 8, k = rand_r(&seed) % NSNAP;
		size_t pg = rand_r(&seed) % NPAGES, n;
		size_t off = pg * PAGE_SZ + rand_r(&seed) % PAGE_SZ;

		n = 1 + rand_r(&seed) % 3;
		if (pg + n > NPAGES)
			n = NPAGES - pg;
		switch (op) {
		case 0: /* write through the mapping */
			fill(src + pg * PAGE_SZ, n * PAGE_SZ, step);
			break;
		case 1: /* pwrite, unaligned */
			fill(buf, PAGE_SZ * 4, step);
			REQUIRE(pwrite(fd, buf, n * PAGE_SZ - 8,
				       off < len - n * PAGE_SZ ? off : pg * PAGE_SZ) > 0,
				"pwrite");
			break;
		case 2: /* punch, maybe partial */
			REQUIRE(fallocate(fd, FALLOC_FL_PUNCH_HOLE |
					  FALLOC_FL_KEEP_SIZE, off,
					  n * PAGE_SZ - 100) == 0, "punch");
			break;
		case 3: /* snapshot k, again */
			if (s[k])
				munmap(s[k], len);
			s[k] = snap(NULL, src, len);
			REQUIRE(s[k] != MAP_FAILED, "snapshot: %s",
				strerror(errno));
			memcpy(model[k], src, len);
			break;
		case 4: /* drop snapshot k */
			if (s[k])
				munmap(s[k], len);
			s[k] = NULL;
			break;
		case 5: /* another process writes */
			if (step % 10 == 0)
				in_other_process(fd, len, fill_fn, step);
			break;
		case 6: /* reclaim */
			madvise(src + pg * PAGE_SZ, n * PAGE_SZ, MADV_PAGEOUT);
			break;
		case 7: /* write-protect and back */
			mprotect(src, len, PROT_READ);
			mprotect(src, len, PROT_READ | PROT_WRITE);
			break;
		}
		for (i = 0; i < NSNAP; i++)
			if (s[i] && memcmp(s[i], model[i], len)) {
				FAIL("step %d (op %d): snapshot %d differs",
				     step, op, i);
				return;
			}
	}
}

static struct test_case cases[] = {
	{ "detect_shared", test_detect_shared },
	{ "other_process_writes", test_other_process_writes },
	{ "mappings_before_and_after", test_mappings_before_and_after },
	{ "write_syscall", test_write_syscall },
	{ "holes", test_holes },
	{ "sparse", test_sparse },
	{ "punch_and_truncate", test_punch_and_truncate },
	{ "many_snapshots", test_many_snapshots },
	{ "snapshot_vma_ops", test_snapshot_vma_ops },
	{ "mprotect_upgrade", test_mprotect_upgrade },
	{ "fork_holder", test_fork_holder },
	{ "swap", test_swap, 120 },
	{ "compaction", test_compaction },
	{ "pinned", test_pinned },
	{ "concurrent_writer", test_concurrent_writer, 120 },
	{ "exit_and_accounting", test_exit_and_accounting, 120 },
	{ "fuzz", test_fuzz, 300 },
};

int main(int argc, char **argv)
{
	return run_tests("vm_snapshot of MFD_SNAPSHOT memfds", cases,
			 sizeof(cases) / sizeof(cases[0]), argc, argv);
}
