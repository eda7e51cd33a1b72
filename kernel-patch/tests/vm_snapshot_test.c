// SPDX-License-Identifier: GPL-2.0
/*
 * Functional selftests of vm_snapshot(2).  Every case runs in its own child
 * process; output is TAP.  Usage: vm_snapshot_test [case-name-prefix...]
 *
 * Some cases need root and a prepared guest (zram swap, hugetlb pages,
 * THP in "madvise" or "always" mode); run-tests.sh boots such a guest.
 * Environment: VMSNAP_SWAPDEV (default /dev/zram0) for the swapoff case.
 */
#include "common.h"

#include <linux/userfaultfd.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/ioctl.h>
#include <sys/swap.h>
#include <sched.h>
#include <sys/uio.h>

#ifndef MADV_PAGEOUT
#define MADV_PAGEOUT 21
#endif
#ifndef MAP_HUGETLB
#define MAP_HUGETLB 0x40000
#endif

/* ---------------------------------------------------------------- basics */

static void test_detect(void)
{
	long abi = read_file_long(VM_SNAPSHOT_SYSFS_DIR "/abi_version");
	long nr = read_file_long(VM_SNAPSHOT_SYSFS_DIR "/syscall_nr");

	CHECK(abi == 1, "abi_version %ld", abi);
	CHECK(nr == 451, "syscall_nr %ld", nr);
	CHECK(vm_snapshot_detect() == 451, "detect");
}

static void test_basic_content(void)
{
	size_t len = 64 * PAGE_SZ;
	char *src = map_rw(len), *dst;

	fill(src, len, 1);
	dst = snap(NULL, src, len);
	REQUIRE(dst != MAP_FAILED, "snapshot: %s", strerror(errno));
	CHECK(((uintptr_t)dst & (PAGE_SZ - 1)) == 0, "aligned %p", dst);
	CHECK(dst + len <= src || dst >= src + len, "no overlap");
	CHECK(check(dst, len, 1) == -1, "content");
	CHECK(check(src, len, 1) == -1, "source intact");
	CHECK(!strcmp(perms_of(dst), "rw-p"), "perms %s", perms_of(dst));
	CHECK(vmas_in(dst, dst + len) == 1, "one VMA");
	/* Private pages are shared until written. */
	CHECK(pfn_of(dst) && pfn_of(dst) == pfn_of(src), "shared pfn");
	CHECK(pfn_of(dst + 63 * PAGE_SZ) == pfn_of(src + 63 * PAGE_SZ),
	      "shared pfn (last)");
	CHECK(munmap(dst, len) == 0, "munmap");
	CHECK(check(src, len, 1) == -1, "source intact after munmap");
}

static void test_cow_isolation(void)
{
	size_t len = 32 * PAGE_SZ, i;
	char *src = map_rw(len), *dst;

	fill(src, len, 2);
	dst = snap(NULL, src, len);
	REQUIRE(dst != MAP_FAILED, "snapshot: %s", strerror(errno));
	/* Write the even pages of src and the odd pages of dst. */
	for (i = 0; i < 32; i++) {
		char *p = (i % 2 ? dst : src) + i * PAGE_SZ;

		memset(p, 0x5a + (i % 2), PAGE_SZ);
	}
	for (i = 0; i < 32; i++) {
		char *s = src + i * PAGE_SZ, *d = dst + i * PAGE_SZ;

		if (i % 2) {
			CHECK(d[0] == 0x5b && d[PAGE_SZ - 1] == 0x5b,
			      "dst page %zu written", i);
			CHECK(pfn_of(s) != pfn_of(d), "dst page %zu copied", i);
		} else {
			CHECK(s[0] == 0x5a && s[PAGE_SZ - 1] == 0x5a,
			      "src page %zu written", i);
			CHECK(pfn_of(s) != pfn_of(d), "src page %zu copied", i);
		}
	}
	/* The pages not written on a side keep the old content there. */
	for (i = 0; i < 32; i++) {
		uint64_t *s = (uint64_t *)(src + i * PAGE_SZ);
		uint64_t *d = (uint64_t *)(dst + i * PAGE_SZ);
		uint64_t *old = i % 2 ? s : d;

		CHECK(old[0] == pattern(2, i * PAGE_SZ / 8) &&
		      old[511] == pattern(2, i * PAGE_SZ / 8 + 511),
		      "page %zu old content on the unwritten side", i);
	}
}

/* Never-touched pages and zero-page mappings snapshot as zeroes. */
static void test_untouched_and_zero_pages(void)
{
	size_t len = 16 * PAGE_SZ;
	char *src = map_rw(len), *dst;
	volatile char sink;
	int i;

	/* pages 0-3 written, 4-7 read (zero page), 8-15 untouched */
	memset(src, 0x11, 4 * PAGE_SZ);
	for (i = 4; i < 8; i++)
		sink = src[i * PAGE_SZ];
	(void)sink;
	dst = snap(NULL, src, len);
	REQUIRE(dst != MAP_FAILED, "snapshot: %s", strerror(errno));
	for (i = 0; i < 16; i++)
		src[i * PAGE_SZ + 7] = 0x22;
	CHECK(dst[0] == 0x11 && dst[4 * PAGE_SZ - 1] == 0x11, "written");
	CHECK(all_zero(dst + 4 * PAGE_SZ, 12 * PAGE_SZ), "zero pages");
	for (i = 0; i < 16; i++)
		CHECK(src[i * PAGE_SZ + 7] == 0x22, "src %d", i);
	dst[8 * PAGE_SZ] = 1;
	CHECK(src[8 * PAGE_SZ] == 0, "src untouched by dst write");
}

static void test_snapshot_of_snapshot(void)
{
	size_t len = 16 * PAGE_SZ;
	char *lvl[6];
	int i;

	lvl[0] = map_rw(len);
	fill(lvl[0], len, 100);
	for (i = 1; i < 6; i++) {
		lvl[i] = snap(NULL, lvl[i - 1], len);
		REQUIRE(lvl[i] != MAP_FAILED, "level %d: %s", i,
			strerror(errno));
		/* change half of the pages of the new level */
		fill(lvl[i], len / 2, 100 + i);
	}
	/* level i: first half seed 100+i (or 100 for i=0), second half 100 */
	for (i = 0; i < 6; i++) {
		CHECK(check(lvl[i], len / 2, i ? 100 + i : 100) == -1,
		      "level %d first half", i);
		CHECK(check_off(lvl[i] + len / 2, len / 2, 100, len / 2) == -1,
		      "level %d second half", i);
	}
	CHECK(pfn_of(lvl[5] + len / 2) == pfn_of(lvl[0] + len / 2),
	      "second half still shared five levels down");
	/* A snapshot of the middle of a chain, then unmap the chain. */
	for (i = 0; i < 5; i++)
		CHECK(munmap(lvl[i], len) == 0, "munmap %d", i);
	CHECK(check(lvl[5], len / 2, 105) == -1, "last level survives");
}

static void test_many_snapshots(void)
{
	enum { N = 200 };
	size_t len = 8 * PAGE_SZ;
	char *src = map_rw(len), *s[N];
	long rss0;
	int i;

	fill(src, len, 7);
	rss0 = status_kb("RssAnon");

	for (i = 0; i < N; i++) {
		fill(src, PAGE_SZ, 1000 + i);	/* first page changes */
		s[i] = snap(NULL, src, len);
		REQUIRE(s[i] != MAP_FAILED, "snapshot %d: %s", i,
			strerror(errno));
	}
	for (i = 0; i < N; i++) {
		CHECK(check(s[i], PAGE_SZ, 1000 + i) == -1, "snapshot %d", i);
		CHECK(check_off(s[i] + PAGE_SZ, len - PAGE_SZ, 7, PAGE_SZ) == -1,
		      "snapshot %d tail", i);
	}
	CHECK(status_kb("RssAnon") >= rss0 + N * 7 * 4,
	      "rss counts every mapping (%ld -> %ld)", rss0,
	      status_kb("RssAnon"));
	for (i = 0; i < N; i++)
		CHECK(munmap(s[i], len) == 0, "munmap");
	CHECK(status_kb("RssAnon") <= rss0 + 8, "rss back (%ld -> %ld)", rss0,
	      status_kb("RssAnon"));
}

/* --------------------------------------------------------- multiple VMAs */

/*
 * A source made of five VMAs: private rw, private r (written before
 * mprotect), shared anonymous rw (aliased), private rw with a MAP_NORESERVE
 * flag, and a private file mapping of a memfd (partly COWed).
 */
static void test_multi_vma(void)
{
	size_t pg = PAGE_SZ, len = 20 * pg;
	char *base = map_anon(len, PROT_NONE, MAP_PRIVATE | MAP_NORESERVE);
	char *dst;
	int fd = memfd_create("vmsnap", 0);
	char *m;
	int i;

	REQUIRE(fd >= 0, "memfd");
	REQUIRE(ftruncate(fd, 4 * pg) == 0, "ftruncate");
	for (i = 0; i < 4; i++) {
		char b[1] = { 'a' + i };

		REQUIRE(pwrite(fd, b, 1, i * pg) == 1, "pwrite");
	}
	REQUIRE(mmap(base, 4 * pg, PROT_READ | PROT_WRITE,
		     MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) == base,
		"map 0");
	REQUIRE(mmap(base + 4 * pg, 4 * pg, PROT_READ | PROT_WRITE,
		     MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) ==
			base + 4 * pg, "map 1");
	REQUIRE(mmap(base + 8 * pg, 4 * pg, PROT_READ | PROT_WRITE,
		     MAP_SHARED | MAP_ANONYMOUS | MAP_FIXED, -1, 0) ==
			base + 8 * pg, "map 2");
	REQUIRE(mmap(base + 12 * pg, 4 * pg, PROT_READ | PROT_WRITE,
		     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED,
		     -1, 0) == base + 12 * pg, "map 3");
	m = mmap(base + 16 * pg, 4 * pg, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_FIXED, fd, 0);
	REQUIRE(m == base + 16 * pg, "map 4");
	fill(base, 16 * pg, 11);
	m[0] = 'A';			/* COW the first file page */
	REQUIRE(mprotect(base + 4 * pg, 4 * pg, PROT_READ) == 0, "mprotect");
	CHECK(vmas_in(base, base + len) == 5, "five source VMAs, got %d",
	      vmas_in(base, base + len));

	dst = snap(NULL, base, len);
	REQUIRE(dst != MAP_FAILED, "snapshot: %s", strerror(errno));
	CHECK(vmas_in(dst, dst + len) == 5, "five VMAs, got %d",
	      vmas_in(dst, dst + len));
	CHECK(vmas_in(base, base + len) == 5, "source not split");
	CHECK(check(dst, 16 * pg, 11) == -1, "anon content");
	CHECK(dst[16 * pg] == 'A' && dst[17 * pg] == 'b' &&
	      dst[19 * pg] == 'd', "file content %c %c %c", dst[16 * pg],
	      dst[17 * pg], dst[19 * pg]);
	CHECK(!strcmp(perms_of(dst), "rw-p"), "perm 0 %s", perms_of(dst));
	CHECK(!strcmp(perms_of(dst + 4 * pg), "r--p"), "perm 1 %s",
	      perms_of(dst + 4 * pg));
	CHECK(!strcmp(perms_of(dst + 8 * pg), "rw-s"), "perm 2 %s",
	      perms_of(dst + 8 * pg));
	CHECK(!strcmp(perms_of(dst + 16 * pg), "rw-p"), "perm 4 %s",
	      perms_of(dst + 16 * pg));
	CHECK(write_faults(dst + 5 * pg), "read-only copy");

	/* private parts are isolated, the shared part is aliased */
	base[0] = 1;
	base[12 * pg] = 2;
	m[pg] = 'B';
	dst[pg] = 3;
	CHECK(dst[0] != 1 && dst[12 * pg] != 2 && dst[17 * pg] == 'b',
	      "private isolated");
	CHECK(base[pg] != 3, "private isolated (dst write)");
	base[8 * pg] = 0x77;
	CHECK(dst[8 * pg] == 0x77, "shared: src write visible in dst");
	dst[9 * pg] = 0x66;
	CHECK(base[9 * pg] == 0x66, "shared: dst write visible in src");
	munmap(dst, len);
	munmap(base, len);
	close(fd);
}

/* Snapshot a part of a large VMA: the source VMA must not be split. */
static void test_partial_vma(void)
{
	size_t len = 64 * PAGE_SZ;
	char *src = map_rw(len), *dst;

	fill(src, len, 3);
	dst = snap(NULL, src + 5 * PAGE_SZ, 20 * PAGE_SZ);
	REQUIRE(dst != MAP_FAILED, "snapshot: %s", strerror(errno));
	CHECK(vmas_in(src, src + len) == 1, "source VMA split");
	CHECK(!memcmp(dst, src + 5 * PAGE_SZ, 20 * PAGE_SZ), "content");
	src[5 * PAGE_SZ] ^= 1;
	CHECK(dst[0] != src[5 * PAGE_SZ], "isolated");
}

/* Source and destination far apart, with different PMD offsets. */
static void test_unaligned_cross_pmd(void)
{
	size_t len = 3 * HPAGE_SZ + 5 * PAGE_SZ;
	char *src = map_rw(len + 64 * PAGE_SZ) + 13 * PAGE_SZ;
	char *dst;
	size_t i;

	fill(src, len, 4);
	dst = snap(NULL, src, len);
	REQUIRE(dst != MAP_FAILED, "snapshot: %s", strerror(errno));
	NOTE("src %% 2M = %#lx, dst %% 2M = %#lx",
	     (unsigned long)((uintptr_t)src % HPAGE_SZ),
	     (unsigned long)((uintptr_t)dst % HPAGE_SZ));
	CHECK(check(dst, len, 4) == -1, "content");
	for (i = 0; i < len; i += PAGE_SZ)
		if (pfn_of(dst + i) != pfn_of(src + i)) {
			FAIL("page %zu not shared", i / PAGE_SZ);
			break;
		}
	/* and a destination at yet another offset (reuse) */
	{
		char *d2 = map_rw(len + 32 * PAGE_SZ) + 7 * PAGE_SZ;

		REQUIRE(snap(d2, dst, len) == d2, "reuse: %s",
			strerror(errno));
		CHECK(check(d2, len, 4) == -1, "content 2");
	}
}

/* Source and destination in the same PTE table: same page-table lock. */
static void test_same_pte_table(void)
{
	char *base = map_aligned(HPAGE_SZ, HPAGE_SZ, PROT_READ | PROT_WRITE,
				 MAP_PRIVATE);
	char *src = base, *dst = base + HPAGE_SZ / 2, *r;

	madvise(base, HPAGE_SZ, MADV_NOHUGEPAGE);
	fill(src, 64 * PAGE_SZ, 5);
	memset(dst, 0xee, 64 * PAGE_SZ);
	/* dst inside the same VMA as src: replaced, VMA split */
	r = snap(dst, src, 64 * PAGE_SZ);
	REQUIRE(r == dst, "snapshot: %p %s", r, strerror(errno));
	CHECK(check(dst, 64 * PAGE_SZ, 5) == -1, "content");
	CHECK(pfn_of(dst) == pfn_of(src), "shared");
	src[0] ^= 0xff;
	dst[PAGE_SZ] ^= 0xff;
	CHECK(((uint64_t *)dst)[0] == pattern(5, 0), "dst isolated");
	CHECK(((uint64_t *)src)[512] == pattern(5, 512), "src isolated");
	/* and into an adjacent new range inside the same table */
	r = snap(base + HPAGE_SZ / 4, dst, 64 * PAGE_SZ);
	REQUIRE(r == base + HPAGE_SZ / 4, "snapshot 2: %s", strerror(errno));
	CHECK(!memcmp(r, dst, 64 * PAGE_SZ), "content 2");
}

/* ------------------------------------------------------ destination reuse */

static void test_dst_reuse(void)
{
	size_t len = 16 * PAGE_SZ;
	char *src = map_rw(len);
	char *area = map_rw(len + 2 * PAGE_SZ), *dst = area + PAGE_SZ, *r;
	int i;

	memset(area, 0x33, len + 2 * PAGE_SZ);
	for (i = 0; i < 10; i++) {
		fill(src, len, 20 + i);
		r = snap(dst, src, len);
		REQUIRE(r == dst, "reuse %d: %p %s", i, r, strerror(errno));
		CHECK(check(dst, len, 20 + i) == -1, "content %d", i);
	}
	CHECK(area[0] == 0x33 && area[PAGE_SZ - 1] == 0x33, "before intact");
	CHECK(dst[len] == 0x33 && area[len + 2 * PAGE_SZ - 1] == 0x33,
	      "after intact");
	CHECK(vmas_in(area, area + len + 2 * PAGE_SZ) == 3, "three VMAs");

	/* destination spanning several VMAs of different kinds */
	REQUIRE(mprotect(dst + 4 * PAGE_SZ, PAGE_SZ, PROT_READ) == 0, "mp");
	REQUIRE(mmap(dst + 8 * PAGE_SZ, 2 * PAGE_SZ, PROT_READ | PROT_WRITE,
		     MAP_SHARED | MAP_ANONYMOUS | MAP_FIXED, -1, 0) ==
			dst + 8 * PAGE_SZ, "map shared");
	fill(src, len, 40);
	r = snap(dst, src, len);
	REQUIRE(r == dst, "reuse multi: %s", strerror(errno));
	CHECK(check(dst, len, 40) == -1, "content multi");
	CHECK(vmas_in(dst, dst + len) == 1, "dst is one VMA again: %d",
	      vmas_in(dst, dst + len));
	CHECK(!strcmp(perms_of(dst + 8 * PAGE_SZ), "rw-p"), "perm %s",
	      perms_of(dst + 8 * PAGE_SZ));
}

/* A destination with a hole is refused and left untouched. */
static void test_dst_reuse_hole(void)
{
	size_t len = 8 * PAGE_SZ;
	char *src = map_rw(len), *dst = map_rw(len);

	fill(src, len, 50);
	fill(dst, len, 51);
	munmap(dst + 3 * PAGE_SZ, PAGE_SZ);
	EXPECT_ERR(snap(dst, src, len), EFAULT);
	CHECK(check(dst, 3 * PAGE_SZ, 51) == -1, "dst intact");
	CHECK(((uint64_t *)(dst + 4 * PAGE_SZ))[0] ==
	      pattern(51, 4 * PAGE_SZ / 8), "dst intact after hole");
	CHECK(vmas_in(dst, dst + len) == 2, "dst VMAs unchanged");
}

/* ------------------------------------------------------------------ errors */

static void test_bad_args(void)
{
	size_t len = 8 * PAGE_SZ;
	char *src = map_rw(len), *other = map_rw(len);
	char *hole;

	EXPECT_ERR(snap(NULL, src + 1, PAGE_SZ), EINVAL);
	EXPECT_ERR(snap(NULL, src, PAGE_SZ + 1), EINVAL);
	EXPECT_ERR(snap(NULL, src, 100), EINVAL);
	EXPECT_ERR(snap(NULL, src, 0), EINVAL);
	EXPECT_ERR(snap(other + 8, src, PAGE_SZ), EINVAL);
	/* overlapping ranges */
	EXPECT_ERR(snap(src, src, len), EINVAL);
	EXPECT_ERR(snap(src + PAGE_SZ, src, 2 * PAGE_SZ), EINVAL);
	EXPECT_ERR(snap(src, src + PAGE_SZ, 2 * PAGE_SZ), EINVAL);
	/* wrapping and out-of-range */
	EXPECT_ERR(snap(NULL, src, (size_t)0 - PAGE_SZ), EINVAL);
	EXPECT_ERR(snap(NULL, (void *)(0UL - PAGE_SZ), 2 * PAGE_SZ), EINVAL);
	EXPECT_ERR(snap(NULL, (void *)0xffff800000000000UL, PAGE_SZ), EINVAL);
	EXPECT_ERR(snap((void *)(0UL - PAGE_SZ), src, PAGE_SZ), EINVAL);
	EXPECT_ERR(snap((void *)0x7ffffffff000UL, src, 2 * PAGE_SZ), EINVAL);
	EXPECT_ERR(snap(NULL, src, 1UL << 48), EINVAL);
	/* unmapped source, source with a hole, unmapped destination */
	hole = map_rw(3 * PAGE_SZ);
	munmap(hole + PAGE_SZ, PAGE_SZ);
	EXPECT_ERR(snap(NULL, hole + PAGE_SZ, PAGE_SZ), EFAULT);
	EXPECT_ERR(snap(NULL, hole, 3 * PAGE_SZ), EFAULT);
	EXPECT_ERR(snap(NULL, hole + PAGE_SZ, 2 * PAGE_SZ), EFAULT);
	EXPECT_ERR(snap(NULL, (void *)PAGE_SZ, PAGE_SZ), EFAULT);
	EXPECT_ERR(snap(hole + PAGE_SZ, src, PAGE_SZ), EFAULT);
	EXPECT_ERR(snap(hole, src, 3 * PAGE_SZ), EFAULT);
	/* nothing was created or destroyed */
	CHECK(vmas_in(hole, hole + 3 * PAGE_SZ) == 2, "hole VMAs");
	CHECK(vmas_in(src, src + len) == 1, "src VMAs");
}

static int uffd_register(void *p, size_t len)
{
	struct uffdio_api api = { .api = UFFD_API };
	struct uffdio_register reg = {
		.range = { .start = (uintptr_t)p, .len = len },
		.mode = UFFDIO_REGISTER_MODE_MISSING,
	};
	int fd = syscall(__NR_userfaultfd, O_CLOEXEC | O_NONBLOCK);

	if (fd < 0)
		return -1;
	if (ioctl(fd, UFFDIO_API, &api) || ioctl(fd, UFFDIO_REGISTER, &reg)) {
		close(fd);
		return -1;
	}
	return fd;
}

/* Every refused kind of VMA, alone and as part of a larger range. */
static void test_refused_vmas(void)
{
	size_t len = 4 * PAGE_SZ;
	void *s, *e;
	char *p, *big, *dst;
	int fd;

	/* VM_IO | VM_PFNMAP (and VM_DONTEXPAND): [vvar] */
	if (find_mapping("[vvar]", &s, &e))
		EXPECT_ERR(snap(NULL, s, (char *)e - (char *)s), EOPNOTSUPP);
	else
		FAIL("no [vvar]");
	/* VM_DONTEXPAND special mapping: [vdso] */
	if (find_mapping("[vdso]", &s, &e))
		EXPECT_ERR(snap(NULL, s, (char *)e - (char *)s), EOPNOTSUPP);
	else
		FAIL("no [vdso]");
	/* VM_DONTCOPY */
	p = map_rw(len);
	p[0] = 1;
	REQUIRE(madvise(p, len, MADV_DONTFORK) == 0, "DONTFORK");
	EXPECT_ERR(snap(NULL, p, len), EOPNOTSUPP);
	REQUIRE(madvise(p, len, MADV_DOFORK) == 0, "DOFORK");
	CHECK(snap(NULL, p, len) != MAP_FAILED, "after MADV_DOFORK");
	/* VM_MERGEABLE (KSM) */
	p = map_rw(len);
	p[0] = 1;
	REQUIRE(madvise(p, len, MADV_MERGEABLE) == 0, "MERGEABLE: %s",
		strerror(errno));
	EXPECT_ERR(snap(NULL, p, len), EOPNOTSUPP);
	REQUIRE(madvise(p, len, MADV_UNMERGEABLE) == 0, "UNMERGEABLE");
	CHECK(snap(NULL, p, len) != MAP_FAILED, "after MADV_UNMERGEABLE");
	/* userfaultfd-registered */
	p = map_rw(len);
	fd = uffd_register(p, len);
	CHECK(fd >= 0, "userfaultfd: %s", strerror(errno));
	if (fd >= 0) {
		EXPECT_ERR(snap(NULL, p, len), EOPNOTSUPP);
		close(fd);
		CHECK(snap(NULL, p, len) != MAP_FAILED, "after uffd close");
	}
	/* hugetlb */
	p = mmap(NULL, HPAGE_SZ, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB, -1, 0);
	CHECK(p != MAP_FAILED, "MAP_HUGETLB: %s (nr_hugepages set?)",
	      strerror(errno));
	if (p != MAP_FAILED) {
		p[0] = 1;
		EXPECT_ERR(snap(NULL, p, HPAGE_SZ), EOPNOTSUPP);
		munmap(p, HPAGE_SZ);
	}
	/*
	 * A good VMA followed by a refused one: the whole call fails and
	 * nothing is created, and a destination to reuse is left intact.
	 */
	big = map_rw(2 * len);
	fill(big, 2 * len, 60);
	REQUIRE(madvise(big + len, len, MADV_DONTFORK) == 0, "DONTFORK 2");
	dst = map_rw(2 * len);
	fill(dst, 2 * len, 61);
	EXPECT_ERR(snap(NULL, big, 2 * len), EOPNOTSUPP);
	EXPECT_ERR(snap(dst, big, 2 * len), EOPNOTSUPP);
	CHECK(check(dst, 2 * len, 61) == -1, "dst intact");
}

/* A dst range registered with userfaultfd is simply replaced. */
static void test_dst_userfaultfd(void)
{
	size_t len = 4 * PAGE_SZ;
	char *src = map_rw(len), *dst = map_rw(len);
	int fd = uffd_register(dst, len);

	REQUIRE(fd >= 0, "userfaultfd: %s", strerror(errno));
	fill(src, len, 62);
	REQUIRE(snap(dst, src, len) == dst, "snapshot: %s", strerror(errno));
	CHECK(check(dst, len, 62) == -1, "content");
	close(fd);
}

/* ------------------------------------------------ concurrency: TLB flush */

struct writer_ctx {
	volatile uint64_t *base;
	int npages;
	atomic_ulong *counter;
	atomic_int *stop;
	atomic_ulong writes;
};

static void *writer(void *arg)
{
	struct writer_ctx *w = arg;
	unsigned long n = 0;

	while (!atomic_load_explicit(w->stop, memory_order_relaxed)) {
		uint64_t v = atomic_fetch_add(w->counter, 1);

		w->base[(v % w->npages) * (PAGE_SZ / 8) + (v & 7)] = v;
		n++;
	}
	atomic_store(&w->writes, n);
	return NULL;
}

/*
 * Writer threads keep writing increasing sequence numbers to the source
 * while it is snapshotted.  Every value in the snapshot must have been
 * taken from the counter before vm_snapshot() returned, and the snapshot
 * must not change afterwards: a thread that still had a writable TLB entry
 * for a source page would write into the page now shared with the
 * snapshot.
 */
static void test_concurrent_writers(void)
{
	enum { NPAGES = 16, ITER = 300, NTHREADS = 2 };
	size_t len = NPAGES * PAGE_SZ;
	uint64_t *src = (uint64_t *)map_rw(len);
	static uint64_t copy[NPAGES * 512];
	atomic_ulong counter = 1;
	atomic_int stop = 0;
	struct writer_ctx w[NTHREADS];
	pthread_t t[NTHREADS];
	unsigned long leaks = 0, changes = 0, total = 0;
	int i, it;

	REQUIRE(sysconf(_SC_NPROCESSORS_ONLN) >= 2,
		"needs two CPUs for threads to run during the call");
	memset(src, 0, len);
	for (i = 0; i < NTHREADS; i++) {
		w[i] = (struct writer_ctx){ .base = src, .npages = NPAGES,
					    .counter = &counter,
					    .stop = &stop };
		REQUIRE(pthread_create(&t[i], NULL, writer, &w[i]) == 0,
			"pthread_create");
	}
	for (it = 0; it < ITER; it++) {
		uint64_t *dst, after;
		volatile int spin;
		size_t k;

		dst = snap(NULL, src, len);
		after = atomic_load(&counter);
		REQUIRE(dst != MAP_FAILED, "snapshot: %s", strerror(errno));
		memcpy(copy, dst, len);
		for (k = 0; k < NPAGES * 512; k++)
			if (copy[k] >= after)
				leaks++;
		for (spin = 0; spin < 20000; spin++)
			;
		if (memcmp(copy, dst, len))
			changes++;
		munmap(dst, len);
	}
	atomic_store(&stop, 1);
	for (i = 0; i < NTHREADS; i++) {
		pthread_join(t[i], NULL);
		total += atomic_load(&w[i].writes);
	}
	NOTE("%lu writes by %d threads during %d snapshots", total, NTHREADS,
	     ITER);
	CHECK(total > 1000, "writers made progress");
	CHECK(leaks == 0, "%lu values written after the call in snapshots",
	      leaks);
	CHECK(changes == 0, "%lu snapshots changed after the call", changes);
}

/* Snapshots in several threads at once, of overlapping sources. */
static void *snapper(void *arg)
{
	char *src = arg;
	int i;

	for (i = 0; i < 100; i++) {
		char *d = snap(NULL, src, 32 * PAGE_SZ);

		if (d == MAP_FAILED || check(d, 32 * PAGE_SZ, 70) != -1)
			return (void *)1;
		munmap(d, 32 * PAGE_SZ);
	}
	return NULL;
}

static void test_concurrent_snapshots(void)
{
	char *src = map_rw(32 * PAGE_SZ);
	pthread_t t[3];
	void *r;
	int i;

	fill(src, 32 * PAGE_SZ, 70);
	for (i = 0; i < 3; i++)
		pthread_create(&t[i], NULL, snapper, src);
	for (i = 0; i < 3; i++) {
		pthread_join(t[i], &r);
		CHECK(r == NULL, "thread %d", i);
	}
}

/* ----------------------------------------------------------------- swap */

static bool swap_available(void)
{
	return meminfo_kb("SwapTotal") > 0;
}

/* Push [p, p+len) to swap; returns the number of swapped-out pages. */
static size_t page_out(char *p, size_t len)
{
	size_t i, n = 0;
	int tries;

	for (tries = 0; tries < 10; tries++) {
		madvise(p, len, MADV_PAGEOUT);
		for (n = 0, i = 0; i < len; i += PAGE_SZ)
			n += is_swapped(p + i);
		if (n == len / PAGE_SZ)
			break;
		usleep(1000);
	}
	return n;
}

static void test_swap(void)
{
	enum { NPAGES = 256, NSNAP = 100 };
	size_t len = NPAGES * PAGE_SZ, n;
	char *src = map_rw(len), *s[NSNAP];
	long swap0 = status_kb("VmSwap");
	int i;

	REQUIRE(swap_available(), "no swap configured");
	fill(src, len, 80);
	n = page_out(src, len);
	NOTE("%zu of %d pages swapped out", n, NPAGES);
	REQUIRE(n >= NPAGES / 2, "MADV_PAGEOUT swapped only %zu pages", n);
	/*
	 * 100 snapshots of swapped pages: the swap count of each entry goes
	 * beyond SWAP_MAP_MAX, so swap count continuations are used.
	 */
	for (i = 0; i < NSNAP; i++) {
		s[i] = snap(NULL, src, len);
		REQUIRE(s[i] != MAP_FAILED, "snapshot %d: %s", i,
			strerror(errno));
	}
	CHECK(is_swapped(s[0]) && is_swapped(s[NSNAP - 1] + len - PAGE_SZ),
	      "swap entries copied");
	CHECK(status_kb("VmSwap") >= swap0 + (long)(NSNAP * n * 4),
	      "VmSwap counts copies: %ld", status_kb("VmSwap"));
	/* swap in through one snapshot, write through another, and src */
	CHECK(check(s[0], len, 80) == -1, "snapshot 0 content");
	fill(s[1], len, 81);
	fill(src, len / 2, 82);
	CHECK(check(s[0], len, 80) == -1, "snapshot 0 isolated");
	CHECK(check(s[1], len, 81) == -1, "snapshot 1 content");
	CHECK(check(src, len / 2, 82) == -1, "src content");
	CHECK(!memcmp(src + len / 2, s[2] + len / 2, len / 2), "src tail");
	/* unmap half of the snapshots while entries are still swapped */
	for (i = NSNAP / 2; i < NSNAP; i++)
		munmap(s[i], len);
	/* page out again the pages only one mapping has */
	page_out(s[1], len);
	for (i = 2; i < NSNAP / 2; i++)
		if (check(s[i], len, 80) != -1) {
			FAIL("snapshot %d content", i);
			break;
		}
	CHECK(check(s[1], len, 81) == -1, "snapshot 1 after page-out");
	for (i = 0; i < NSNAP / 2; i++)
		munmap(s[i], len);
	munmap(src, len);
	CHECK(status_kb("VmSwap") <= swap0, "VmSwap back: %ld -> %ld", swap0,
	      status_kb("VmSwap"));
}

/*
 * Reclaim and compaction walk the rmap of pages while vm_snapshot copies
 * their PTEs: one thread pages the source out again and again, another
 * compacts memory, the main thread snapshots and checks every copy.
 */
struct pager_ctx {
	char *p;
	size_t len;
	atomic_int *stop;
};

static void *pager(void *arg)
{
	struct pager_ctx *c = arg;

	while (!atomic_load(c->stop)) {
		madvise(c->p, c->len, MADV_PAGEOUT);
		sched_yield();
	}
	return NULL;
}

static void *compactor(void *arg)
{
	struct pager_ctx *c = arg;
	int fd = open("/proc/sys/vm/compact_memory", O_WRONLY);

	while (fd >= 0 && !atomic_load(c->stop)) {
		if (write(fd, "1", 1) != 1)
			break;
		usleep(20000);
	}
	if (fd >= 0)
		close(fd);
	return NULL;
}

static void test_concurrent_reclaim(void)
{
	enum { NPAGES = 128, ITER = 150 };
	size_t len = NPAGES * PAGE_SZ;
	char *src = map_rw(len), *keep[4] = { 0 };
	atomic_int stop = 0;
	struct pager_ctx c = { .p = src, .len = len, .stop = &stop };
	pthread_t t1, t2;
	int it, bad = 0;

	REQUIRE(swap_available(), "no swap configured");
	fill(src, len, 95);
	pthread_create(&t1, NULL, pager, &c);
	pthread_create(&t2, NULL, compactor, &c);
	for (it = 0; it < ITER && !bad; it++) {
		char *d = snap(NULL, src, len);

		REQUIRE(d != MAP_FAILED, "snapshot: %s", strerror(errno));
		if (check(d, len, 95) != -1)
			bad++;
		/* keep a few alive so that pages have several mappings */
		if (keep[it % 4]) {
			if (check(keep[it % 4], len, 95) != -1)
				bad++;
			munmap(keep[it % 4], len);
		}
		keep[it % 4] = d;
		if (it % 8 == 0)
			madvise(d, len, MADV_PAGEOUT);
	}
	atomic_store(&stop, 1);
	pthread_join(t1, NULL);
	pthread_join(t2, NULL);
	CHECK(!bad, "a snapshot differed from its source");
	CHECK(check(src, len, 95) == -1, "source");
}

/* swapoff with snapshots sharing swap entries, then swapon again. */
static void test_swapoff(void)
{
	enum { NPAGES = 128, NSNAP = 70 };
	const char *dev = getenv("VMSNAP_SWAPDEV") ?: "/dev/zram0";
	size_t len = NPAGES * PAGE_SZ;
	char *src = map_rw(len), *s[NSNAP];
	int i;

	REQUIRE(swap_available(), "no swap configured");
	fill(src, len, 90);
	REQUIRE(page_out(src, len) >= NPAGES / 2, "page out");
	for (i = 0; i < NSNAP; i++) {
		s[i] = snap(NULL, src, len);
		REQUIRE(s[i] != MAP_FAILED, "snapshot: %s", strerror(errno));
	}
	fill(s[3], PAGE_SZ, 91);
	page_out(s[3], PAGE_SZ);
	REQUIRE(swapoff(dev) == 0, "swapoff %s: %s", dev, strerror(errno));
	CHECK(status_kb("VmSwap") == 0, "VmSwap %ld after swapoff",
	      status_kb("VmSwap"));
	CHECK(!is_swapped(s[NSNAP - 1]) && !is_swapped(src), "swapped in");
	for (i = 0; i < NSNAP; i++) {
		if (i == 3)
			continue;
		if (check(s[i], len, 90) != -1) {
			FAIL("snapshot %d content after swapoff", i);
			break;
		}
	}
	CHECK(check(s[3], PAGE_SZ, 91) == -1, "written snapshot");
	CHECK(check(src, len, 90) == -1, "src content");
	fill(src, len, 92);
	CHECK(check(s[5], len, 90) == -1, "isolated after swapoff");
	REQUIRE(swapon(dev, 0) == 0, "swapon %s: %s", dev, strerror(errno));
}

/* ------------------------------------------------------------------ THP */

static char *thp_region(size_t len, uint64_t seed)
{
	char *p = map_aligned(len, HPAGE_SZ, PROT_READ | PROT_WRITE,
			      MAP_PRIVATE);

	REQUIRE(madvise(p, len, MADV_HUGEPAGE) == 0, "MADV_HUGEPAGE: %s",
		strerror(errno));
	fill(p, len, seed);
	return p;
}

static void test_thp_aligned(void)
{
	size_t len = 4 * HPAGE_SZ;
	char *src = thp_region(len, 110), *dst;
	long huge = smaps_sum(src, src + len, "AnonHugePages");

	NOTE("AnonHugePages before: %ld kB", huge);
	CHECK(huge > 0, "no THP allocated (THP disabled?)");
	dst = snap(NULL, src, len);
	REQUIRE(dst != MAP_FAILED, "snapshot: %s", strerror(errno));
	CHECK(check(dst, len, 110) == -1, "content");
	CHECK(pfn_of(dst + HPAGE_SZ + 5 * PAGE_SZ) ==
	      pfn_of(src + HPAGE_SZ + 5 * PAGE_SZ), "shared");
	NOTE("AnonHugePages after: src %ld kB dst %ld kB",
	     smaps_sum(src, src + len, "AnonHugePages"),
	     smaps_sum(dst, dst + len, "AnonHugePages"));
	fill(src, HPAGE_SZ, 111);
	fill(dst + HPAGE_SZ, HPAGE_SZ, 112);
	CHECK(check(dst, HPAGE_SZ, 110) == -1, "dst isolated");
	CHECK(check_off(src + HPAGE_SZ, 3 * HPAGE_SZ, 110, HPAGE_SZ) == -1,
	      "src isolated");
	CHECK(check(dst + HPAGE_SZ, HPAGE_SZ, 112) == -1, "dst written");
	CHECK(check(src, HPAGE_SZ, 111) == -1, "src written");
	/* snapshot of the snapshot, fork, munmap */
	{
		char *d2 = snap(NULL, dst, len);

		REQUIRE(d2 != MAP_FAILED, "snap 2");
		CHECK(!memcmp(d2, dst, len), "content 2");
		munmap(d2, len);
	}
	munmap(src, len);
	CHECK(check(dst, HPAGE_SZ, 110) == -1, "dst after src munmap");
}

static void test_thp_unaligned(void)
{
	size_t len = 4 * HPAGE_SZ;
	char *src = thp_region(len, 120), *dst, *d2;
	size_t off = 3 * PAGE_SZ, slen = 2 * HPAGE_SZ - 5 * PAGE_SZ;

	CHECK(smaps_sum(src, src + len, "AnonHugePages") > 0, "no THP");
	/* part of one huge page plus part of the next */
	dst = snap(NULL, src + HPAGE_SZ - off, slen);
	REQUIRE(dst != MAP_FAILED, "snapshot: %s", strerror(errno));
	CHECK(!memcmp(dst, src + HPAGE_SZ - off, slen), "content");
	/* into a destination at a different offset modulo 2M */
	d2 = map_aligned(len, HPAGE_SZ, PROT_READ | PROT_WRITE, MAP_PRIVATE);
	REQUIRE(snap(d2 + 7 * PAGE_SZ, src + 2 * HPAGE_SZ, HPAGE_SZ) ==
			d2 + 7 * PAGE_SZ, "snapshot 2: %s", strerror(errno));
	CHECK(check_off(d2 + 7 * PAGE_SZ, HPAGE_SZ, 120, 2 * HPAGE_SZ) == -1,
	      "content 2");
	memset(src, 0, len);
	CHECK(((uint64_t *)dst)[0] ==
	      pattern(120, (HPAGE_SZ - off) / 8), "dst isolated");
	CHECK(((uint64_t *)(d2 + 7 * PAGE_SZ))[0] ==
	      pattern(120, 2 * HPAGE_SZ / 8), "d2 isolated");
	memset(dst, 1, slen);
	CHECK(all_zero(src, len), "src isolated");
}

/* ------------------------------------------------ fork, munmap, mremap... */

static void test_fork_after_snapshot(void)
{
	size_t len = 16 * PAGE_SZ;
	char *src = map_rw(len), *dst;
	pid_t pid;
	int status;

	fill(src, len, 130);
	dst = snap(NULL, src, len);
	REQUIRE(dst != MAP_FAILED, "snapshot");
	pid = fork();
	if (pid == 0) {
		int bad = 0;

		bad |= check(src, len, 130) != -1;
		bad |= check(dst, len, 130) != -1;
		fill(src, len, 131);
		fill(dst, len / 2, 132);
		bad |= check_off(dst + len / 2, len / 2, 130, len / 2) != -1;
		{
			/* a snapshot in the child */
			char *c = snap(NULL, dst, len);

			bad |= c == MAP_FAILED;
			if (c != MAP_FAILED)
				bad |= check(c, len / 2, 132) != -1;
		}
		_exit(bad);
	}
	REQUIRE(pid > 0, "fork");
	waitpid(pid, &status, 0);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child");
	CHECK(check(src, len, 130) == -1, "parent src");
	CHECK(check(dst, len, 130) == -1, "parent dst");
	fill(dst, len, 133);
	CHECK(check(src, len, 130) == -1, "parent src after dst write");
}

static void test_munmap_either(void)
{
	size_t len = 16 * PAGE_SZ;
	char *src = map_rw(len), *dst, *d2;

	fill(src, len, 140);
	dst = snap(NULL, src, len);
	d2 = snap(NULL, src, len);
	REQUIRE(dst != MAP_FAILED && d2 != MAP_FAILED, "snapshot");
	munmap(src, len);
	CHECK(check(dst, len, 140) == -1, "dst after src munmap");
	munmap(dst + 4 * PAGE_SZ, 4 * PAGE_SZ);
	CHECK(read_faults(dst + 4 * PAGE_SZ), "hole");
	CHECK(check(dst, 4 * PAGE_SZ, 140) == -1, "dst head");
	CHECK(((uint64_t *)(dst + 8 * PAGE_SZ))[0] ==
	      pattern(140, 8 * PAGE_SZ / 8), "dst tail");
	munmap(dst, len);
	CHECK(check(d2, len, 140) == -1, "d2");
}

static void test_mremap_either(void)
{
	size_t len = 16 * PAGE_SZ;
	char *src = map_rw(len), *dst, *m, *far;

	fill(src, len, 150);
	dst = snap(NULL, src, len);
	REQUIRE(dst != MAP_FAILED, "snapshot");
	/* move and grow the snapshot */
	far = map_anon(4 * len, PROT_NONE, MAP_PRIVATE);
	m = mremap(dst, len, 2 * len, MREMAP_MAYMOVE | MREMAP_FIXED, far);
	REQUIRE(m == far, "mremap dst: %s", strerror(errno));
	CHECK(check(m, len, 150) == -1, "moved snapshot");
	CHECK(all_zero(m + len, len), "grown part");
	fill(m, len, 151);
	CHECK(check(src, len, 150) == -1, "src after moved dst write");
	/* move the source; snapshot of the moved source; write */
	m = mremap(src, len, len, MREMAP_MAYMOVE | MREMAP_FIXED,
		   far + 2 * len);
	REQUIRE(m == far + 2 * len, "mremap src: %s", strerror(errno));
	dst = snap(NULL, m, len);
	REQUIRE(dst != MAP_FAILED, "snapshot of moved source");
	CHECK(check(dst, len, 150) == -1, "content");
	fill(m, len, 152);
	CHECK(check(dst, len, 150) == -1, "isolated");
	/* shrink a snapshot in place */
	CHECK(mremap(dst, len, len / 2, 0) == dst, "shrink");
	CHECK(check(dst, len / 2, 150) == -1, "shrunk content");
}

static void test_mprotect_either(void)
{
	size_t len = 16 * PAGE_SZ;
	char *src = map_rw(len), *dst;

	fill(src, len, 160);
	dst = snap(NULL, src, len);
	REQUIRE(dst != MAP_FAILED, "snapshot");
	REQUIRE(mprotect(dst, len, PROT_READ) == 0, "mprotect dst ro");
	CHECK(write_faults(dst + 3 * PAGE_SZ), "dst read-only");
	CHECK(!write_faults(src + 3 * PAGE_SZ), "src writable");
	REQUIRE(mprotect(dst + 4 * PAGE_SZ, 4 * PAGE_SZ,
			 PROT_READ | PROT_WRITE) == 0, "mprotect part rw");
	fill(dst + 4 * PAGE_SZ, 4 * PAGE_SZ, 161);
	CHECK(((uint64_t *)(src + 4 * PAGE_SZ))[0] ==
	      pattern(160, 4 * PAGE_SZ / 8), "src isolated");
	REQUIRE(mprotect(src, len, PROT_READ) == 0, "mprotect src ro");
	CHECK(write_faults(src), "src read-only");
	REQUIRE(mprotect(src, len, PROT_READ | PROT_WRITE) == 0, "src rw");
	fill(src, len, 162);
	CHECK(((uint64_t *)dst)[0] == pattern(160, 0), "dst isolated");
	CHECK(check(dst + 4 * PAGE_SZ, 4 * PAGE_SZ, 161) == -1, "dst part");
	/* PROT_NONE source with content: snapshot keeps prot and data */
	REQUIRE(mprotect(src, len, PROT_NONE) == 0, "prot none");
	dst = snap(NULL, src, len);
	REQUIRE(dst != MAP_FAILED, "snapshot of PROT_NONE");
	CHECK(read_faults(dst), "PROT_NONE copy");
	REQUIRE(mprotect(dst, len, PROT_READ) == 0, "mprotect copy");
	CHECK(check(dst, len, 162) == -1, "PROT_NONE content");
}

static void test_madvise_dontneed(void)
{
	size_t len = 16 * PAGE_SZ;
	char *src = map_rw(len), *dst;

	fill(src, len, 170);
	dst = snap(NULL, src, len);
	REQUIRE(dst != MAP_FAILED, "snapshot");
	REQUIRE(madvise(src, len, MADV_DONTNEED) == 0, "DONTNEED src");
	CHECK(all_zero(src, len), "src zero");
	CHECK(check(dst, len, 170) == -1, "dst kept");
	REQUIRE(madvise(dst, len / 2, MADV_DONTNEED) == 0, "DONTNEED dst");
	CHECK(all_zero(dst, len / 2), "dst zero");
}

static void test_mlocked_source(void)
{
	size_t len = 16 * PAGE_SZ;
	char *src = map_rw(len), *dst;
	long lck0;

	fill(src, len, 180);
	REQUIRE(mlock(src, len) == 0, "mlock: %s", strerror(errno));
	lck0 = status_kb("VmLck");
	dst = snap(NULL, src, len);
	REQUIRE(dst != MAP_FAILED, "snapshot: %s", strerror(errno));
	CHECK(status_kb("VmLck") == lck0, "snapshot is not locked");
	CHECK(check(dst, len, 180) == -1, "content");
	fill(src, len, 181);
	CHECK(check(dst, len, 180) == -1, "isolated");
	munlock(src, len);
}

/* Private file mapping of a file: COWed pages copied, file pages shared. */
static void test_private_file(void)
{
	size_t len = 8 * PAGE_SZ;
	int fd = memfd_create("vmsnap-file", 0);
	char *src, *dst, buf[PAGE_SZ];

	REQUIRE(fd >= 0, "memfd");
	memset(buf, 'f', sizeof(buf));
	for (int i = 0; i < 8; i++)
		REQUIRE(write(fd, buf, PAGE_SZ) == PAGE_SZ, "write");
	src = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
	REQUIRE(src != MAP_FAILED, "mmap");
	src[0] = 'c';		/* COW page 0 */
	(void)*(volatile char *)(src + PAGE_SZ);	/* map page 1 */
	dst = snap(NULL, src, len);
	REQUIRE(dst != MAP_FAILED, "snapshot: %s", strerror(errno));
	CHECK(dst[0] == 'c' && dst[1] == 'f', "cow page");
	CHECK(dst[PAGE_SZ] == 'f' && dst[7 * PAGE_SZ] == 'f', "file pages");
	src[0] = 'd';
	src[2 * PAGE_SZ] = 'e';
	CHECK(dst[0] == 'c' && dst[2 * PAGE_SZ] == 'f', "isolated");
	dst[PAGE_SZ] = 'g';
	CHECK(src[PAGE_SZ] == 'f', "isolated (dst write)");
	REQUIRE(pread(fd, buf, 1, PAGE_SZ) == 1 && buf[0] == 'f',
		"file untouched");
}

/* MAP_SHARED sources are aliased: both ranges map the same pages. */
static void test_shared_alias(void)
{
	size_t len = 8 * PAGE_SZ;
	int fd = memfd_create("vmsnap-shared", 0);
	char *a, *b, *da, *db;

	REQUIRE(fd >= 0 && ftruncate(fd, len) == 0, "memfd");
	a = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	b = map_anon(len, PROT_READ | PROT_WRITE, MAP_SHARED);
	REQUIRE(a != MAP_FAILED, "mmap");
	fill(a, len, 190);
	fill(b, len, 191);
	da = snap(NULL, a, len);
	db = snap(NULL, b, len);
	REQUIRE(da != MAP_FAILED && db != MAP_FAILED, "snapshot: %s",
		strerror(errno));
	CHECK(check(da, len, 190) == -1 && check(db, len, 191) == -1,
	      "content");
	CHECK(!strcmp(perms_of(da), "rw-s"), "shared perms %s", perms_of(da));
	fill(a, len, 192);
	fill(db, len, 193);
	CHECK(check(da, len, 192) == -1, "memfd aliased");
	CHECK(check(b, len, 193) == -1, "shared anon aliased");
	munmap(a, len);
	CHECK(check(da, len, 192) == -1, "alias survives munmap of source");
}

/* -------------------------------------------------- pinned source pages */

#ifndef __NR_io_uring_setup
#define __NR_io_uring_setup 425
#define __NR_io_uring_register 427
#endif

/*
 * A page pinned with FOLL_PIN (io_uring fixed buffer) must stay exclusive to
 * the source: the snapshot gets its own copy immediately.
 */
static void test_pinned_source(void)
{
	size_t len = 4 * PAGE_SZ;
	char *src = map_rw(len), *dst;
	struct { uint32_t a[30]; } params;
	struct iovec iov = { .iov_base = src, .iov_len = PAGE_SZ };
	int ring;

	fill(src, len, 200);
	memset(&params, 0, sizeof(params));
	ring = syscall(__NR_io_uring_setup, 4, &params);
	REQUIRE(ring >= 0, "io_uring_setup: %s", strerror(errno));
	/* IORING_REGISTER_BUFFERS == 0 */
	REQUIRE(syscall(__NR_io_uring_register, ring, 0, &iov, 1) == 0,
		"register buffers: %s", strerror(errno));
	dst = snap(NULL, src, len);
	REQUIRE(dst != MAP_FAILED, "snapshot: %s", strerror(errno));
	CHECK(check(dst, len, 200) == -1, "content");
	CHECK(pfn_of(dst) && pfn_of(dst) != pfn_of(src),
	      "pinned page copied (%#llx %#llx)",
	      (unsigned long long)pfn_of(dst),
	      (unsigned long long)pfn_of(src));
	CHECK(pfn_of(dst + PAGE_SZ) == pfn_of(src + PAGE_SZ),
	      "unpinned page shared");
	fill(src, len, 201);
	CHECK(check(dst, len, 200) == -1, "isolated");
	close(ring);
}

/* ---------------------------------------------------------- migration */

/* Compaction migrates pages mapped in several places through rmap. */
static void test_compaction(void)
{
	enum { NSNAP = 8 };
	size_t len = 512 * PAGE_SZ;
	char *src = map_rw(len), *s[NSNAP];
	int i;

	fill(src, len, 210);
	for (i = 0; i < NSNAP; i++) {
		s[i] = snap(NULL, src, len);
		REQUIRE(s[i] != MAP_FAILED, "snapshot");
		fill(src + i * PAGE_SZ * 8, PAGE_SZ, 211 + i);
	}
	write_file("/proc/sys/vm/compact_memory", "1");
	for (i = 0; i < NSNAP; i++) {
		size_t k;

		for (k = 0; k < (size_t)i; k++)
			CHECK(check(s[i] + k * PAGE_SZ * 8, PAGE_SZ,
				    211 + k) == -1, "snap %d page %zu", i, k);
		CHECK(((uint64_t *)(s[i] + len - PAGE_SZ))[0] ==
		      pattern(210, (len - PAGE_SZ) / 8), "snap %d tail", i);
	}
	write_file("/proc/sys/vm/compact_memory", "1");
	CHECK(check_off(src + len / 2, len / 2, 210, len / 2) == -1, "src");
}

/* ------------------------------------------------- accounting and limits */

struct acct {
	long size, data, rss_anon, swap, committed;
};

static struct acct acct_now(void)
{
	return (struct acct){
		.size = status_kb("VmSize"),
		.data = status_kb("VmData"),
		.rss_anon = status_kb("RssAnon"),
		.swap = status_kb("VmSwap"),
		.committed = meminfo_kb("Committed_AS"),
	};
}

static void acct_print(const char *what, struct acct a)
{
	NOTE("%-9s VmSize %ld VmData %ld RssAnon %ld VmSwap %ld Committed_AS %ld",
	     what, a.size, a.data, a.rss_anon, a.swap, a.committed);
}

static void test_accounting(void)
{
	enum { N = 10 };
	size_t len = 256 * PAGE_SZ;
	char *src = map_rw(len), *nores, *s[N], *sn;
	struct acct a0, a1, a2;
	int i;

	fill(src, len, 220);
	nores = map_anon(len, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_NORESERVE);
	fill(nores, len, 221);
	a0 = acct_now();
	acct_print("baseline", a0);
	for (i = 0; i < N; i++) {
		s[i] = snap(NULL, src, len);
		REQUIRE(s[i] != MAP_FAILED, "snapshot");
		fill(s[i], len / 4, 222);
	}
	a1 = acct_now();
	sn = snap(NULL, nores, len);
	REQUIRE(sn != MAP_FAILED, "snapshot noreserve");
	a2 = acct_now();
	acct_print("snapshots", a1);
	CHECK(a1.size - a0.size == N * 1024, "VmSize +%ld kB",
	      a1.size - a0.size);
	CHECK(a1.data - a0.data == N * 1024, "VmData +%ld kB",
	      a1.data - a0.data);
	CHECK(a1.rss_anon - a0.rss_anon >= N * 1024 - 64, "RssAnon +%ld kB",
	      a1.rss_anon - a0.rss_anon);
	/* private writable copies are charged like a private mmap */
	CHECK(a1.committed - a0.committed >= N * 1024 - 256,
	      "Committed_AS +%ld kB", a1.committed - a0.committed);
	CHECK(a2.committed - a1.committed < 256,
	      "MAP_NORESERVE copy charged %ld kB", a2.committed - a1.committed);
	munmap(sn, len);
	for (i = 0; i < N; i++)
		munmap(s[i], len);
	a2 = acct_now();
	acct_print("after", a2);
	CHECK(a2.size == a0.size, "VmSize back");
	CHECK(a2.data == a0.data, "VmData back");
	CHECK(labs(a2.rss_anon - a0.rss_anon) <= 16, "RssAnon back");
	CHECK(a2.swap == a0.swap, "VmSwap back");
	CHECK(labs(a2.committed - a0.committed) < 512, "Committed_AS back");
}

/*
 * A limit hit in the middle of a multi-VMA snapshot: the call fails with
 * ENOMEM, whatever was created is removed, and accounting balances.
 */
static void test_failure_rollback(void)
{
	size_t pg = PAGE_SZ, len = 64 * pg;
	char *src = map_rw(len), *dst;
	struct rlimit rl;
	struct acct a0, a1;
	long data_kb;
	int i;

	fill(src, len, 230);
	for (i = 0; i < 64; i += 2)	/* 64 VMAs */
		mprotect(src + i * pg, pg, PROT_READ);
	REQUIRE(vmas_in(src, src + len) == 64, "64 VMAs");
	dst = map_rw(len);
	a0 = acct_now();
	data_kb = a0.data;
	/*
	 * Allow about half of the 32 writable one-page copies (they count as
	 * data, the read-only ones do not).
	 */
	getrlimit(RLIMIT_DATA, &rl);
	rl.rlim_cur = (data_kb + 16 * 4) * 1024;
	REQUIRE(setrlimit(RLIMIT_DATA, &rl) == 0, "setrlimit");
	EXPECT_ERR(snap(NULL, src, len), ENOMEM);
	a1 = acct_now();
	CHECK(a1.size == a0.size && a1.data == a0.data &&
	      labs(a1.rss_anon - a0.rss_anon) <= 16 &&
	      labs(a1.committed - a0.committed) < 256, "balanced");
	acct_print("before", a0);
	acct_print("after", a1);
	/* with a destination to reuse (its data is unmapped first) */
	rl.rlim_cur = (data_kb - len / 1024 + 16 * 4) * 1024;
	REQUIRE(setrlimit(RLIMIT_DATA, &rl) == 0, "setrlimit");
	EXPECT_ERR(snap(dst, src, len), ENOMEM);
	CHECK(vmas_in(dst, dst + len) == 0, "dst unmapped after failure");
	rl.rlim_cur = RLIM_INFINITY;
	setrlimit(RLIMIT_DATA, &rl);
	/* vm.max_map_count */
	{
		long old = read_file_long("/proc/sys/vm/max_map_count");
		char buf[32];
		int maps = vmas_in(NULL, (void *)-1);

		snprintf(buf, sizeof(buf), "%d", maps + 10);
		write_file("/proc/sys/vm/max_map_count", buf);
		EXPECT_ERR(snap(NULL, src, len), ENOMEM);
		CHECK(vmas_in(NULL, (void *)-1) == maps, "no VMA left over");
		snprintf(buf, sizeof(buf), "%ld", old);
		write_file("/proc/sys/vm/max_map_count", buf);
	}
	dst = snap(NULL, src, len);
	REQUIRE(dst != MAP_FAILED, "snapshot after limits lifted");
	CHECK(check(dst, len, 230) == -1, "content");
}

/* Exit with live snapshots (mm teardown path). */
static void test_exit_with_snapshots(void)
{
	int i, status;

	for (i = 0; i < 4; i++) {
		pid_t pid = fork();

		if (pid == 0) {
			size_t len = 64 * PAGE_SZ;
			char *src = map_rw(len);
			int k;

			fill(src, len, 240);
			if (i & 1)
				page_out(src, len);
			for (k = 0; k < 20; k++)
				if (snap(NULL, src, len) == MAP_FAILED)
					_exit(1);
			if (i & 2) {
				pid_t c = fork();

				if (c == 0)
					_exit(0);
				waitpid(c, NULL, 0);
			}
			_exit(0);
		}
		waitpid(pid, &status, 0);
		CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child %d",
		      i);
	}
}

static struct test_case cases[] = {
	{ "detect", test_detect },
	{ "basic_content", test_basic_content },
	{ "cow_isolation", test_cow_isolation },
	{ "untouched_and_zero_pages", test_untouched_and_zero_pages },
	{ "snapshot_of_snapshot", test_snapshot_of_snapshot },
	{ "many_snapshots", test_many_snapshots },
	{ "multi_vma", test_multi_vma },
	{ "partial_vma", test_partial_vma },
	{ "unaligned_cross_pmd", test_unaligned_cross_pmd },
	{ "same_pte_table", test_same_pte_table },
	{ "dst_reuse", test_dst_reuse },
	{ "dst_reuse_hole", test_dst_reuse_hole },
	{ "dst_userfaultfd", test_dst_userfaultfd },
	{ "bad_args", test_bad_args },
	{ "refused_vmas", test_refused_vmas },
	{ "concurrent_writers", test_concurrent_writers, 120 },
	{ "concurrent_snapshots", test_concurrent_snapshots },
	{ "swap", test_swap, 120 },
	{ "swapoff", test_swapoff, 120 },
	{ "concurrent_reclaim", test_concurrent_reclaim, 120 },
	{ "thp_aligned", test_thp_aligned },
	{ "thp_unaligned", test_thp_unaligned },
	{ "fork_after_snapshot", test_fork_after_snapshot },
	{ "munmap_either", test_munmap_either },
	{ "mremap_either", test_mremap_either },
	{ "mprotect_either", test_mprotect_either },
	{ "madvise_dontneed", test_madvise_dontneed },
	{ "mlocked_source", test_mlocked_source },
	{ "private_file", test_private_file },
	{ "shared_alias", test_shared_alias },
	{ "pinned_source", test_pinned_source },
	{ "compaction", test_compaction },
	{ "accounting", test_accounting },
	{ "failure_rollback", test_failure_rollback },
	{ "exit_with_snapshots", test_exit_with_snapshots },
};

int main(int argc, char **argv)
{
	return run_tests("vm_snapshot functional tests", cases,
			 sizeof(cases) / sizeof(cases[0]), argc, argv);
}
