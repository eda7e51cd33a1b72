// SPDX-License-Identifier: GPL-2.0
/*
 * Model-based fuzzing of vm_snapshot(2).
 *
 * An arena of ARENA_PAGES pages is mapped, unmapped, mprotected, written,
 * paged out and snapshotted at random.  A shadow model records for every
 * page whether it is mapped, its protection, its kind and (where it is
 * knowable) its first word.  Every vm_snapshot call predicts its result
 * from the model (success, or EINVAL / EFAULT / EOPNOTSUPP) and the
 * prediction must hold; after a success, the destination must equal the
 * source.  Garbage arguments (random, non-canonical, kernel, wrapping
 * addresses and lengths) are mixed in.  At the end, RSS and VM size must
 * return to their baseline.
 *
 * Usage: vm_snapshot_fuzz [iterations [seed]]
 */
#include "common.h"

#include <pthread.h>

#ifndef MADV_PAGEOUT
#define MADV_PAGEOUT 21
#endif

#define ARENA_PAGES 512
#define MAX_LIVE 32

enum kind {
	K_NONE,			/* unmapped */
	K_PRIV,			/* private anonymous */
	K_PRIV_THP,		/* private anonymous, MADV_HUGEPAGE */
	K_SHARED,		/* shared anonymous */
	K_FILE_PRIV,		/* private mapping of a memfd */
	K_FILE_SHARED,		/* shared mapping of a memfd */
	K_DONTFORK,		/* refused: VM_DONTCOPY */
	K_MERGEABLE,		/* refused: VM_MERGEABLE */
	NR_KINDS
};

struct page_state {
	enum kind kind;
	int prot;
	bool known;		/* is value the page's first word? */
	uint64_t value;
};

static struct page_state shadow[ARENA_PAGES];
static char *arena;
static int memfd;
static uint64_t rng_state;

static struct { char *addr; size_t len; } live[MAX_LIVE];

static unsigned long stats_ok, stats_err[5], stats_ops[16];

static uint64_t rnd(void)
{
	uint64_t x = rng_state;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return rng_state = x;
}

static size_t rnd_below(size_t n)
{
	return n ? rnd() % n : 0;
}

static bool refused(enum kind k)
{
	return k == K_DONTFORK || k == K_MERGEABLE;
}

static bool shared_kind(enum kind k)
{
	return k == K_SHARED || k == K_FILE_SHARED;
}

static char *page_addr(size_t i)
{
	return arena + i * PAGE_SZ;
}

/* Random sub-range [*first, *first + *n) of the arena, n >= 1. */
static void rnd_range(size_t *first, size_t *n)
{
	*first = rnd_below(ARENA_PAGES);
	*n = 1 + rnd_below(rnd() % 4 ? 32 : ARENA_PAGES - *first);
	if (*first + *n > ARENA_PAGES)
		*n = ARENA_PAGES - *first;
}

static void op_map(void)
{
	size_t first, n, i;
	enum kind k = 1 + rnd_below(NR_KINDS - 1);
	int prots[] = { PROT_READ | PROT_WRITE, PROT_READ | PROT_WRITE,
			PROT_READ, PROT_NONE };
	int prot = prots[rnd_below(4)];
	int flags = MAP_FIXED;
	int fd = -1;
	off_t off = 0;
	char *p;

	rnd_range(&first, &n);
	switch (k) {
	case K_SHARED:
		flags |= MAP_SHARED | MAP_ANONYMOUS;
		break;
	case K_FILE_PRIV:
	case K_FILE_SHARED:
		flags |= k == K_FILE_PRIV ? MAP_PRIVATE : MAP_SHARED;
		fd = memfd;
		off = first * PAGE_SZ;	/* file offset = arena offset */
		break;
	default:
		flags |= MAP_PRIVATE | MAP_ANONYMOUS;
		break;
	}
	p = mmap(page_addr(first), n * PAGE_SZ, prot, flags, fd, off);
	REQUIRE(p == page_addr(first), "mmap: %s", strerror(errno));
	if (k == K_PRIV_THP)
		madvise(p, n * PAGE_SZ, MADV_HUGEPAGE);
	if (k == K_DONTFORK)
		REQUIRE(madvise(p, n * PAGE_SZ, MADV_DONTFORK) == 0, "dontfork");
	if (k == K_MERGEABLE)
		REQUIRE(madvise(p, n * PAGE_SZ, MADV_MERGEABLE) == 0,
			"mergeable: %s", strerror(errno));
	for (i = first; i < first + n; i++) {
		shadow[i].kind = k;
		shadow[i].prot = prot;
		/* anonymous memory starts zeroed; file content is shared */
		shadow[i].known = !shared_kind(k) && k != K_FILE_PRIV;
		shadow[i].value = 0;
	}
}

static void op_unmap(void)
{
	size_t first, n, i;

	rnd_range(&first, &n);
	REQUIRE(munmap(page_addr(first), n * PAGE_SZ) == 0, "munmap");
	for (i = first; i < first + n; i++)
		shadow[i] = (struct page_state){ K_NONE, 0, false, 0 };
}

static bool all_mapped(size_t first, size_t n)
{
	size_t i;

	for (i = first; i < first + n; i++)
		if (shadow[i].kind == K_NONE)
			return false;
	return true;
}

static void op_mprotect(void)
{
	int prots[] = { PROT_READ | PROT_WRITE, PROT_READ, PROT_NONE };
	int prot = prots[rnd_below(3)];
	size_t first, n, i;
	int r;

	rnd_range(&first, &n);
	r = mprotect(page_addr(first), n * PAGE_SZ, prot);
	if (!all_mapped(first, n)) {
		CHECK(r == -1 && errno == ENOMEM, "mprotect over a hole");
		/* the part before the hole may have changed: re-read below */
		for (i = first; i < first + n && shadow[i].kind != K_NONE; i++)
			shadow[i].prot = prot;
		return;
	}
	REQUIRE(r == 0, "mprotect: %s", strerror(errno));
	for (i = first; i < first + n; i++)
		shadow[i].prot = prot;
}

static void op_write(void)
{
	size_t i = rnd_below(ARENA_PAGES);
	uint64_t v = rnd() | 1;

	if (shadow[i].kind == K_NONE || !(shadow[i].prot & PROT_WRITE))
		return;
	*(volatile uint64_t *)page_addr(i) = v;
	if (shared_kind(shadow[i].kind)) {
		shadow[i].known = false;	/* aliases may change it */
	} else {
		shadow[i].known = true;
		shadow[i].value = v;
	}
}

static void verify_page(size_t i, const char *when)
{
	uint64_t v;

	if (shadow[i].kind == K_NONE || !(shadow[i].prot & PROT_READ) ||
	    !shadow[i].known || shared_kind(shadow[i].kind))
		return;
	v = *(volatile uint64_t *)page_addr(i);
	CHECK(v == shadow[i].value, "%s: page %zu holds %#llx, want %#llx",
	      when, i, (unsigned long long)v,
	      (unsigned long long)shadow[i].value);
}

static void op_madvise(void)
{
	size_t first, n, i;

	rnd_range(&first, &n);
	if (!all_mapped(first, n))
		return;
	if (rnd() % 2) {
		if (madvise(page_addr(first), n * PAGE_SZ, MADV_DONTNEED))
			return;		/* e.g. refused on locked pages */
		for (i = first; i < first + n; i++) {
			if (shadow[i].kind == K_FILE_PRIV)
				shadow[i].known = false;
			else if (!shared_kind(shadow[i].kind))
				shadow[i].value = 0;
		}
	} else {
		madvise(page_addr(first), n * PAGE_SZ, MADV_PAGEOUT);
	}
}

/* Addresses that are never mapped in this process (or invalid). */
static uintptr_t garbage_addr(bool for_dst)
{
	static const uintptr_t fixed[] = {
		0x1000, 0x2000, 0x3000,	/* below mmap_min_addr region */
		0x00007ffffffff000UL,	/* last user page */
		0x0000800000000000UL,	/* non-canonical */
		0xffff800000000000UL,	/* kernel */
		0xffffffffff600000UL,	/* vsyscall */
		0xfffffffffffff000UL,	/* wraps */
	};

	if (!for_dst && rnd() % 3 == 0)
		return rnd();		/* anything at all, read-only use */
	return fixed[rnd_below(sizeof(fixed) / sizeof(fixed[0]))] +
	       (rnd() % 4 == 0 ? rnd_below(PAGE_SZ) : 0);
}

static size_t garbage_len(void)
{
	static const size_t fixed[] = { 0, 1, PAGE_SZ - 1, PAGE_SZ + 1,
					(size_t)-1, (size_t)-PAGE_SZ,
					1UL << 47, 1UL << 40 };

	return fixed[rnd_below(sizeof(fixed) / sizeof(fixed[0]))];
}

static void op_snapshot(void)
{
	uintptr_t src, dst = 0;
	size_t len, first = 0, n = 0, dfirst = 0, i;
	bool src_arena = rnd() % 8 != 0, dst_arena = false, predictable;
	int want = 0;
	char *r;

	if (src_arena) {
		rnd_range(&first, &n);
		src = (uintptr_t)page_addr(first);
		len = n * PAGE_SZ;
		if (rnd() % 16 == 0)
			src += 1 + rnd_below(PAGE_SZ - 1);
		if (rnd() % 16 == 0)
			len = rnd() % 2 ? garbage_len() : len + 8;
	} else {
		src = garbage_addr(false);
		len = rnd() % 2 ? garbage_len() : PAGE_SZ * (1 + rnd_below(8));
	}
	switch (rnd() % 20) {
	case 0 ... 9:
		dst = 0;
		break;
	case 10 ... 16:
		if (src_arena && n) {
			dfirst = rnd_below(ARENA_PAGES - n + 1);
			dst = (uintptr_t)page_addr(dfirst);
			dst_arena = true;
			break;
		}
		/* fall through */
	default:
		dst = garbage_addr(true);
		break;
	}

	/* Predict the result. */
	predictable = src_arena;
	if (len == 0 || len % PAGE_SZ || src % PAGE_SZ || dst % PAGE_SZ)
		want = EINVAL;
	else if (len > 0x00007ffffffff000UL || src > 0x00007ffffffff000UL - len)
		want = EINVAL;
	else if (dst && (dst > 0x00007ffffffff000UL - len ||
			 (dst < src + len && src < dst + len)))
		want = EINVAL;
	else if (!src_arena)
		predictable = false;
	else {
		for (i = first; i < first + n; i++) {
			if (shadow[i].kind == K_NONE) {
				want = EFAULT;
				break;
			}
			if (refused(shadow[i].kind)) {
				want = EOPNOTSUPP;
				break;
			}
		}
		if (len != n * PAGE_SZ && !want) {
			/* a garbage length that passed the checks */
			predictable = false;
		}
		if (predictable && !want && dst && !dst_arena)
			want = EFAULT;
		if (predictable && !want && dst_arena && !all_mapped(dfirst, n))
			want = EFAULT;
	}

	errno = 0;
	r = snap((void *)dst, (void *)src, len);
	if (r == MAP_FAILED) {
		int e = errno;

		stats_err[e == EINVAL ? 0 : e == EFAULT ? 1 : e == ENOMEM ? 2 :
			  e == EOPNOTSUPP ? 3 : 4]++;
		CHECK(e == EINVAL || e == EFAULT || e == ENOMEM ||
		      e == EOPNOTSUPP, "unexpected errno %d (%s)", e,
		      strerror(e));
		if (predictable || want)
			CHECK(e == want,
			      "snap(%#lx, %#lx, %#zx): errno %d (%s), want %d",
			      (unsigned long)dst, (unsigned long)src, len, e,
			      strerror(e), want);
		return;
	}
	stats_ok++;
	CHECK(!want, "snap(%#lx, %#lx, %#zx) succeeded, want errno %d",
	      (unsigned long)dst, (unsigned long)src, len, want);
	if (dst)
		CHECK((uintptr_t)r == dst, "returned %p, asked %#lx", r,
		      (unsigned long)dst);
	if (!src_arena) {
		/* a garbage source that happened to be mapped */
		if (!dst)
			munmap(r, len);
		return;
	}
	/* Readable pages of the copy equal the source, now. */
	for (i = 0; i < n; i++) {
		struct page_state *s = &shadow[first + i];

		if (s->prot & PROT_READ)
			CHECK(!memcmp(page_addr(first + i), r + i * PAGE_SZ,
				      PAGE_SZ), "copy of page %zu differs",
			      first + i);
	}
	if (dst_arena) {
		/* The copies keep kind, protection and content. */
		memmove(&shadow[dfirst], &shadow[first], n * sizeof(shadow[0]));
		return;
	}
	/* Keep some snapshots alive for a while. */
	i = rnd_below(MAX_LIVE);
	if (live[i].addr)
		munmap(live[i].addr, live[i].len);
	live[i].addr = r;
	live[i].len = len;
}

static void op_fork_check(void)
{
	pid_t pid = fork();
	int status;

	if (pid == 0) {
		size_t i;

		test_failures = 0;
		for (i = 0; i < ARENA_PAGES; i++)
			if (shadow[i].kind != K_DONTFORK)
				verify_page(i, "child");
		_exit(test_failures ? 1 : 0);
	}
	REQUIRE(pid > 0, "fork");
	waitpid(pid, &status, 0);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "fork check");
}

static long size0, rss0;

/*
 * The arena lies in the gap below the stack, above mmap_base: the kernel
 * never picks free space there for mappings without an address, so holes
 * in the arena stay holes while snapshots are created elsewhere.
 */
static char *place_arena(void)
{
	void *s, *e;
	char *want, *p;

	REQUIRE(find_mapping("[stack]", &s, &e), "no [stack]");
	want = (char *)(((uintptr_t)s - (64UL << 20)) & ~(HPAGE_SZ - 1));
	p = mmap(want, ARENA_PAGES * PAGE_SZ, PROT_NONE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE |
		 MAP_FIXED_NOREPLACE, -1, 0);
	REQUIRE(p == want, "arena at %p: %p %s", want, p, strerror(errno));
	return p;
}

static void fuzz_loop(void)
{
	long iters = strtol(getenv("VMSNAP_FUZZ_ITERS") ?: "6000", NULL, 0);
	uint64_t seed = strtoull(getenv("VMSNAP_FUZZ_SEED") ?: "0", NULL, 0);
	long it;
	size_t i;

	if (!seed)
		seed = (uint64_t)time(NULL) * 2654435761u ^ getpid();
	rng_state = seed | 1;
	NOTE("seed %#llx, %ld iterations (VMSNAP_FUZZ_SEED to replay)",
	     (unsigned long long)seed, iters);
	memfd = memfd_create("vmsnap-fuzz", 0);
	REQUIRE(memfd >= 0 && ftruncate(memfd, ARENA_PAGES * PAGE_SZ) == 0,
		"memfd");
	arena = place_arena();
	munmap(arena, ARENA_PAGES * PAGE_SZ);

	for (it = 0; it < iters && test_failures < 10; it++) {
		unsigned int op = rnd() % 100;

		if (op < 35) {
			op_snapshot();
			stats_ops[0]++;
		} else if (op < 50) {
			op_map();
			stats_ops[1]++;
		} else if (op < 58) {
			op_unmap();
			stats_ops[2]++;
		} else if (op < 66) {
			op_mprotect();
			stats_ops[3]++;
		} else if (op < 90) {
			op_write();
			stats_ops[4]++;
		} else if (op < 97) {
			op_madvise();
			stats_ops[5]++;
		} else if (op < 98) {
			op_fork_check();
			stats_ops[6]++;
		} else {
			for (i = 0; i < ARENA_PAGES; i++)
				verify_page(i, "scan");
			stats_ops[7]++;
		}
		if (test_failures)
			NOTE("failure at iteration %ld", it);
	}
	for (i = 0; i < ARENA_PAGES; i++)
		verify_page(i, "final");
	NOTE("snapshot calls %lu: %lu ok, EINVAL %lu EFAULT %lu ENOMEM %lu "
	     "EOPNOTSUPP %lu other %lu", stats_ops[0], stats_ok, stats_err[0],
	     stats_err[1], stats_err[2], stats_err[3], stats_err[4]);
	NOTE("map %lu unmap %lu mprotect %lu write %lu madvise %lu fork %lu "
	     "scan %lu", stats_ops[1], stats_ops[2], stats_ops[3],
	     stats_ops[4], stats_ops[5], stats_ops[6], stats_ops[7]);
	CHECK(stats_ok >= stats_ops[0] / 10, "too few successful snapshots");
	munmap(arena, ARENA_PAGES * PAGE_SZ);
	for (i = 0; i < MAX_LIVE; i++)
		if (live[i].addr)
			munmap(live[i].addr, live[i].len);
}

static void baseline(void)
{
	size0 = status_kb("VmSize");
	rss0 = status_kb("RssAnon");
}

static void check_baseline(void)
{
	long size = status_kb("VmSize"), rss = status_kb("RssAnon");

	CHECK(size == size0, "VmSize %ld, baseline %ld", size, size0);
	CHECK(labs(rss - rss0) <= 32, "RssAnon %ld, baseline %ld", rss, rss0);
}

static void fuzz(void)
{
	baseline();
	fuzz_loop();
	check_baseline();
}

/* The same loop with several threads calling vm_snapshot concurrently. */
static pthread_barrier_t start_barrier;

static void *garbage_thread(void *arg)
{
	uint64_t x = (uintptr_t)arg | 1;
	int i;

	pthread_barrier_wait(&start_barrier);
	for (i = 0; i < 20000; i++) {
		void *r;

		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		r = snap(NULL, (void *)(x & 0x00007ffffffff000UL),
			 (x >> 20) & 0xff000);
		if (r != MAP_FAILED)
			munmap(r, (x >> 20) & 0xff000);
	}
	return NULL;
}

static void fuzz_threads(void)
{
	pthread_t t[2];
	int i;

	pthread_barrier_init(&start_barrier, NULL, 3);
	for (i = 0; i < 2; i++)
		pthread_create(&t[i], NULL, garbage_thread,
			       (void *)(uintptr_t)(time(NULL) + i));
	/* thread stacks exist now and stay cached by glibc after exit */
	baseline();
	pthread_barrier_wait(&start_barrier);
	fuzz_loop();
	for (i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	check_baseline();
}

static struct test_case cases[] = {
	{ "fuzz_model", fuzz, 240 },
	{ "fuzz_model_with_garbage_threads", fuzz_threads, 240 },
};

int main(int argc, char **argv)
{
	return run_tests("vm_snapshot fuzz", cases,
			 sizeof(cases) / sizeof(cases[0]), argc, argv);
}
