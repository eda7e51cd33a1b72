/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Small test harness for the vm_snapshot selftests: TAP output, every test
 * case in its own forked child (a crash or a hang fails that case only),
 * plus helpers to read /proc and to fill and check memory.
 */
#ifndef VM_SNAPSHOT_TEST_COMMON_H
#define VM_SNAPSHOT_TEST_COMMON_H

#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../include/vm_snapshot.h"

#define PAGE_SZ 4096UL
#define HPAGE_SZ (2UL << 20)

static int test_failures;

#define FAIL(...)                                                            \
	do {                                                                 \
		printf("#   %s:%d: ", __func__, __LINE__);                   \
		printf(__VA_ARGS__);                                         \
		printf("\n");                                                \
		fflush(stdout);                                              \
		test_failures++;                                             \
	} while (0)

#define CHECK(cond, ...)                                                     \
	do {                                                                 \
		if (!(cond)) {                                               \
			printf("#   %s:%d: check failed: %s: ", __func__,   \
			       __LINE__, #cond);                             \
			printf(__VA_ARGS__);                                 \
			printf("\n");                                        \
			fflush(stdout);                                      \
			test_failures++;                                     \
		}                                                            \
	} while (0)

/* Abort the current test case (we are in a child process). */
#define REQUIRE(cond, ...)                                                   \
	do {                                                                 \
		if (!(cond)) {                                               \
			CHECK(cond, __VA_ARGS__);                            \
			exit(1);                                             \
		}                                                            \
	} while (0)

#define NOTE(...)                                                            \
	do {                                                                 \
		printf("#   ");                                              \
		printf(__VA_ARGS__);                                         \
		printf("\n");                                                \
		fflush(stdout);                                              \
	} while (0)

/* Expect vm_snapshot to fail with the given errno. */
#define EXPECT_ERR(call, err)                                                \
	do {                                                                 \
		void *_r;                                                    \
		errno = 0;                                                   \
		_r = (call);                                                 \
		CHECK(_r == MAP_FAILED && errno == (err),                    \
		      "%s returned %p errno %d (%s), want errno %d (%s)",   \
		      #call, _r, errno, strerror(errno), err,                \
		      strerror(err));                                        \
	} while (0)

struct test_case {
	const char *name;
	void (*fn)(void);
	int timeout;		/* seconds */
};

static inline void *snap(void *dst, void *src, size_t len)
{
	return vm_snapshot(dst, src, len);
}

static inline void *map_anon(size_t len, int prot, int flags)
{
	void *p = mmap(NULL, len, prot, MAP_ANONYMOUS | flags, -1, 0);

	REQUIRE(p != MAP_FAILED, "mmap %zu: %s", len, strerror(errno));
	return p;
}

static inline void *map_rw(size_t len)
{
	return map_anon(len, PROT_READ | PROT_WRITE, MAP_PRIVATE);
}

/* Map len bytes aligned to align (a power of two). */
static inline void *map_aligned(size_t len, size_t align, int prot, int flags)
{
	char *p = map_anon(len + align, prot, flags);
	char *a = (char *)(((uintptr_t)p + align - 1) & ~(align - 1));

	if (a > p)
		munmap(p, a - p);
	if (a + len < p + len + align)
		munmap(a + len, p + len + align - (a + len));
	return a;
}

static inline uint64_t pattern(uint64_t seed, size_t word)
{
	uint64_t x = seed * 0x9e3779b97f4a7c15ULL + word;

	x ^= x >> 29;
	return x * 0xbf58476d1ce4e5b9ULL + 1;
}

/* Fill every page with a pattern; the first word of a page is unique. */
static inline void fill(void *p, size_t len, uint64_t seed)
{
	uint64_t *w = p;
	size_t i;

	for (i = 0; i < len / 8; i++)
		w[i] = pattern(seed, i);
}

/* Returns the offset of the first mismatch, or -1. */
static inline long check(const void *p, size_t len, uint64_t seed)
{
	const uint64_t *w = p;
	size_t i;

	for (i = 0; i < len / 8; i++)
		if (w[i] != pattern(seed, i))
			return (long)(i * 8);
	return -1;
}

/* check() for a range that starts off bytes into the filled area. */
static inline long check_off(const void *p, size_t len, uint64_t seed,
			     size_t off)
{
	const uint64_t *w = p;
	size_t i;

	for (i = 0; i < len / 8; i++)
		if (w[i] != pattern(seed, off / 8 + i))
			return (long)(i * 8);
	return -1;
}

static inline bool all_zero(const void *p, size_t len)
{
	const uint64_t *w = p;
	size_t i;

	for (i = 0; i < len / 8; i++)
		if (w[i])
			return false;
	return true;
}

static inline uint64_t pagemap_entry(const void *addr)
{
	uint64_t e = 0;
	int fd = open("/proc/self/pagemap", O_RDONLY);

	REQUIRE(fd >= 0, "open pagemap: %s", strerror(errno));
	REQUIRE(pread(fd, &e, 8, ((uintptr_t)addr / PAGE_SZ) * 8) == 8,
		"pread pagemap");
	close(fd);
	return e;
}

#define PM_PRESENT (1ULL << 63)
#define PM_SWAP (1ULL << 62)
#define PM_PFN_MASK ((1ULL << 55) - 1)

/* PFN of a present page, 0 if not present. */
static inline uint64_t pfn_of(const void *addr)
{
	uint64_t e = pagemap_entry(addr);

	return (e & PM_PRESENT) ? (e & PM_PFN_MASK) : 0;
}

static inline bool is_swapped(const void *addr)
{
	return pagemap_entry(addr) & PM_SWAP;
}

/* A "Name:  value kB" field of a /proc file, -1 if missing. */
static inline long proc_field(const char *file, const char *name)
{
	char line[256];
	size_t n = strlen(name);
	long v = -1;
	FILE *f = fopen(file, "r");

	REQUIRE(f, "open %s", file);
	while (fgets(line, sizeof(line), f)) {
		if (!strncmp(line, name, n) && line[n] == ':') {
			v = strtol(line + n + 1, NULL, 10);
			break;
		}
	}
	fclose(f);
	return v;
}

/*
 * RSS counters are cached per task (SPLIT_RSS_COUNTING) and reach the mm
 * only now and then; unmapping a touched page flushes this task's cache.
 */
static inline void sync_rss(void)
{
	char *p = mmap(NULL, PAGE_SZ, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p != MAP_FAILED) {
		p[0] = 1;
		munmap(p, PAGE_SZ);
	}
}

static inline long status_kb(const char *name)
{
	sync_rss();
	return proc_field("/proc/self/status", name);
}

static inline long meminfo_kb(const char *name)
{
	return proc_field("/proc/meminfo", name);
}

/* Number of VMAs intersecting [start, end). */
static inline int vmas_in(const void *start, const void *end)
{
	char line[512];
	unsigned long s, e;
	int n = 0;
	FILE *f = fopen("/proc/self/maps", "r");

	REQUIRE(f, "open maps");
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%lx-%lx", &s, &e) != 2)
			continue;
		if (s < (uintptr_t)end && e > (uintptr_t)start)
			n++;
	}
	fclose(f);
	return n;
}

/* Permissions ("rw-p") of the VMA containing addr; "" if none. */
static inline const char *perms_of(const void *addr)
{
	static char perms[8];
	char line[512], p[8];
	unsigned long s, e;
	FILE *f = fopen("/proc/self/maps", "r");

	perms[0] = 0;
	REQUIRE(f, "open maps");
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%lx-%lx %7s", &s, &e, p) != 3)
			continue;
		if (s <= (uintptr_t)addr && (uintptr_t)addr < e) {
			strcpy(perms, p);
			break;
		}
	}
	fclose(f);
	return perms;
}

/* Start/end of a named mapping such as "[vdso]". */
static inline bool find_mapping(const char *name, void **start, void **end)
{
	char line[512];
	unsigned long s, e;
	bool found = false;
	FILE *f = fopen("/proc/self/maps", "r");

	REQUIRE(f, "open maps");
	while (fgets(line, sizeof(line), f)) {
		if (strstr(line, name) && sscanf(line, "%lx-%lx", &s, &e) == 2) {
			*start = (void *)s;
			*end = (void *)e;
			found = true;
			break;
		}
	}
	fclose(f);
	return found;
}

/* Sum of a field (e.g. "AnonHugePages") over the smaps of VMAs in range. */
static inline long smaps_sum(const void *start, const void *end,
			     const char *field)
{
	char line[512];
	unsigned long s, e;
	bool in = false;
	long sum = 0;
	size_t n = strlen(field);
	FILE *f = fopen("/proc/self/smaps", "r");

	REQUIRE(f, "open smaps");
	while (fgets(line, sizeof(line), f)) {
		/* "A..." field names start with a hex digit: need both. */
		if (sscanf(line, "%lx-%lx ", &s, &e) == 2) {
			in = s < (uintptr_t)end && e > (uintptr_t)start;
			continue;
		}
		if (in && !strncmp(line, field, n) && line[n] == ':')
			sum += strtol(line + n + 1, NULL, 10);
	}
	fclose(f);
	return sum;
}

static sigjmp_buf probe_jmp;

static inline void probe_handler(int sig)
{
	siglongjmp(probe_jmp, 1);
}

/* Does writing one byte at p fault?  (Restores the byte otherwise.) */
static inline bool write_faults(volatile char *p)
{
	struct sigaction sa = { .sa_handler = probe_handler }, old_segv,
			 old_bus;
	bool faulted = false;

	sigaction(SIGSEGV, &sa, &old_segv);
	sigaction(SIGBUS, &sa, &old_bus);
	if (sigsetjmp(probe_jmp, 1) == 0) {
		char c = *p;

		*p = c;
	} else {
		faulted = true;
	}
	sigaction(SIGSEGV, &old_segv, NULL);
	sigaction(SIGBUS, &old_bus, NULL);
	return faulted;
}

static inline bool read_faults(volatile char *p)
{
	struct sigaction sa = { .sa_handler = probe_handler }, old_segv,
			 old_bus;
	bool faulted = false;

	sigaction(SIGSEGV, &sa, &old_segv);
	sigaction(SIGBUS, &sa, &old_bus);
	if (sigsetjmp(probe_jmp, 1) == 0)
		(void)*p;
	else
		faulted = true;
	sigaction(SIGSEGV, &old_segv, NULL);
	sigaction(SIGBUS, &old_bus, NULL);
	return faulted;
}

static inline double now_sec(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static inline void write_file(const char *path, const char *val)
{
	int fd = open(path, O_WRONLY);

	REQUIRE(fd >= 0, "open %s: %s", path, strerror(errno));
	REQUIRE(write(fd, val, strlen(val)) == (ssize_t)strlen(val),
		"write %s to %s: %s", val, path, strerror(errno));
	close(fd);
}

static inline long read_file_long(const char *path)
{
	char buf[64] = { 0 };
	int fd = open(path, O_RDONLY);

	if (fd < 0)
		return -1;
	if (read(fd, buf, sizeof(buf) - 1) <= 0) {
		close(fd);
		return -1;
	}
	close(fd);
	return strtol(buf, NULL, 10);
}

/*
 * Run each selected case in a child.  argv: optional case names (prefix
 * match).  Prints TAP; returns the process exit status.
 */
static inline int run_tests(const char *suite, struct test_case *cases,
			    int n, int argc, char **argv)
{
	int i, j, planned = 0, failed = 0, num = 0;
	bool sel[256] = { false };

	setvbuf(stdout, NULL, _IOLBF, 0);
	/* Detect once, before any test allocates (or starts threads). */
	if (vm_snapshot_detect() < 0) {
		printf("# %s\n1..0\nBail out! vm_snapshot not available "
		       "(no %s/abi_version %d)\n", suite, VM_SNAPSHOT_SYSFS_DIR,
		       VM_SNAPSHOT_ABI_VERSION);
		return 1;
	}
	for (i = 0; i < n; i++) {
		sel[i] = argc < 2;
		for (j = 1; j < argc; j++)
			if (!strncmp(cases[i].name, argv[j], strlen(argv[j])))
				sel[i] = true;
		planned += sel[i];
	}
	printf("# %s\n1..%d\n", suite, planned);
	for (i = 0; i < n; i++) {
		double t0;
		pid_t pid;
		int status;

		if (!sel[i])
			continue;
		num++;
		t0 = now_sec();
		fflush(stdout);
		pid = fork();
		if (pid == 0) {
			alarm(cases[i].timeout ? cases[i].timeout : 60);
			test_failures = 0;
			cases[i].fn();
			fflush(stdout);
			_exit(test_failures ? 1 : 0);
		}
		if (pid < 0 || waitpid(pid, &status, 0) != pid) {
			printf("not ok %d - %s # fork/wait failed\n", num,
			       cases[i].name);
			failed++;
			continue;
		}
		if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
			printf("ok %d - %s # %.2fs\n", num, cases[i].name,
			       now_sec() - t0);
		} else {
			if (WIFSIGNALED(status))
				printf("#   killed by signal %d%s\n",
				       WTERMSIG(status),
				       WTERMSIG(status) == SIGALRM ?
					       " (timeout)" : "");
			printf("not ok %d - %s # %.2fs\n", num, cases[i].name,
			       now_sec() - t0);
			failed++;
		}
	}
	printf("# %s: %d passed, %d failed\n", suite, planned - failed, failed);
	return failed ? 1 : 0;
}

#endif
