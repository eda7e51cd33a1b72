// SPDX-License-Identifier: MIT
/*
 * Snapshot micro-benchmark: reproduces Table 1 of the AnKerDB paper and
 * Figure 4 of the AnKer paper (snapshot creation and write cost of a
 * 200 MB column of 51,200 4-KiB pages) for five methods:
 *
 *   memcpy       physical copy into freshly mapped memory
 *   fork         fork() of the whole process (the child is the snapshot)
 *   rewiring     memfd-backed columns; a snapshot mmap()s every run of
 *                contiguous file pages (one VMA each) read-only and write-
 *                protects the column; a SIGSEGV handler does copy-on-write
 *                by copying into a fresh file page and mmap()ing it over
 *                the written page (AnKerDB, Schuhknecht et al.)
 *   swcow        software copy-on-write: a column is an array of page
 *                pointers into a page pool with per-page reference counts;
 *                a snapshot copies the array and takes references, a
 *                writer copies a shared page first (the engine's "cow"
 *                provider, modelled here in C)
 *   vm_snapshot  the system call from kernel-patch/ (only when detected)
 *   vm_snapshot_shared
 *                the same over a MAP_SHARED mapping of a memfd created
 *                with MFD_SNAPSHOT (kernel-patch/0002; only when detected):
 *                how anker's shared arena is snapshotted in PostgreSQL
 *
 * Output: CSV on stdout (or -o FILE), one row per measurement:
 *   experiment,env,method,cols,col_pages,modified,vmas,x,ns
 * experiment  table1 | fig4_snapshot | fig4_write
 * cols        number of columns snapshotted (table1), 1 for fig4
 * col_pages   4-KiB pages per column
 * modified    pages per column written since the columns were created
 *             (table1: before the measured snapshot; fig4: = x)
 * vmas        VMAs backing one source column (rewiring), else 1
 * x           repetition (table1) or number of writes so far (fig4)
 * ns          snapshot creation time, or mean time of one write over the
 *             writes since the previous sample (fig4_write)
 * Other producers (e.g. the Rust engine's own software COW) can append
 * rows with the same columns and a new method name; plot.py merges files.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../../kernel-patch/include/vm_snapshot.h"

#define PAGE 4096UL

/* ------------------------------------------------------------ settings */

static long col_pages = 51200;		/* pages per column */
static int table_cols = 50;		/* columns in the table */
static int snap_cols[8] = { 1, 25, 50 };
static int n_snap_cols = 3;
static long mods[8] = { 0, 500, 5000, 50000 };	/* at 51,200 pages */
static int n_mods = 4;
static int reps = 3;
static long fig4_pages = 51200;
static long fig4_step = 512;		/* sample every N writes ... */
static long fig4_dense = 2048;		/* ... and every 32 before this */
static const char *env_name = "host";
static const char *only_methods;	/* comma list, NULL = all */
static bool run_table1 = true, run_fig4 = true;
static FILE *out;
static uint64_t rng = 88172645463325252ULL;

static uint64_t rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}

static void die(const char *what)
{
	fprintf(stderr, "snapshot_micro: %s: %s\n", what, strerror(errno));
	exit(1);
}

static void *xmmap(size_t len, int prot, int flags, int fd, off_t off)
{
	void *p = mmap(NULL, len, prot, flags, fd, off);

	if (p == MAP_FAILED)
		die("mmap");
	return p;
}

static bool method_on(const char *m)
{
	const char *p;
	size_t n = strlen(m);

	if (!only_methods)
		return true;
	for (p = only_methods; (p = strstr(p, m)); p += n)
		if ((p == only_methods || p[-1] == ',') &&
		    (p[n] == ',' || p[n] == 0))
			return true;
	return false;
}

static long col_pages_for(const char *exp);

static void row(const char *exp, const char *method, int cols, long mod,
		long vmas, long x, uint64_t ns)
{
	fprintf(out, "%s,%s,%s,%d,%ld,%ld,%ld,%ld,%llu\n", exp, env_name,
		method, cols, col_pages_for(exp), mod, vmas, x,
		(unsigned long long)ns);
	fflush(out);
}

/* ------------------------------------------- anonymous table (4 KiB) */

static char *anon_table(long cols, long pages)
{
	size_t len = cols * pages * PAGE;
	char *t = xmmap(len, PROT_READ | PROT_WRITE,
			MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	size_t i;

	madvise(t, len, MADV_NOHUGEPAGE);	/* 4 KiB pages, as the paper */
	for (i = 0; i < len; i += PAGE)
		*(uint64_t *)(t + i) = i;
	return t;
}

/* The same in a MAP_SHARED mapping of an MFD_SNAPSHOT memfd (fd leaked:
 * one per run). */
static char *shared_table(long cols, long pages)
{
	size_t len = cols * pages * PAGE, i;
	int fd = memfd_create("snapshot_micro", MFD_SNAPSHOT);
	char *t;

	if (fd < 0 || ftruncate(fd, len))
		die("memfd_create(MFD_SNAPSHOT)");
	t = xmmap(len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	for (i = 0; i < len; i += PAGE)
		*(uint64_t *)(t + i) = i;
	return t;
}

static void write_word(char *p, uint64_t v)
{
	*(volatile uint64_t *)p = v;
}

/* ------------------------------------------------------------ rewiring */

/*
 * All columns live in one memfd.  pt[c][i] is the file page backing page
 * i of column c.  Fresh pages for copy-on-write come from the end of the
 * file; "window" maps the whole file read-write for the copies.
 */
struct rw_state {
	int fd;
	char *window;
	long file_pages, next_free;
	long ncols, pages;
	char *base;		/* columns, contiguous */
	uint32_t *pt;		/* ncols * pages entries */
	long cow_count;
};

static struct rw_state rw;

static void rw_segv(int sig, siginfo_t *si, void *ctx)
{
	char *a = si->si_addr;
	long idx, newpage;
	char *page;

	if (!rw.base || a < rw.base || a >= rw.base + rw.ncols * rw.pages * PAGE) {
		signal(SIGSEGV, SIG_DFL);
		return;		/* a real crash: re-fault with default action */
	}
	idx = (a - rw.base) / PAGE;
	page = rw.base + idx * PAGE;
	if (rw.next_free >= rw.file_pages) {
		static const char msg[] = "rewiring: page pool exhausted\n";

		write(2, msg, sizeof(msg) - 1);
		_exit(3);
	}
	newpage = rw.next_free++;
	memcpy(rw.window + newpage * PAGE, page, PAGE);
	if (mmap(page, PAGE, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED,
		 rw.fd, newpage * PAGE) == MAP_FAILED)
		_exit(4);
	rw.pt[idx] = newpage;
	rw.cow_count++;
}

static void rw_init(long ncols, long pages, long extra_pages)
{
	struct sigaction sa = { .sa_sigaction = rw_segv,
				.sa_flags = SA_SIGINFO | SA_NODEFER };
	long i;

	rw.ncols = ncols;
	rw.pages = pages;
	rw.file_pages = ncols * pages + extra_pages;
	rw.next_free = ncols * pages;
	rw.fd = memfd_create("rewiring", 0);
	if (rw.fd < 0 || ftruncate(rw.fd, rw.file_pages * PAGE))
		die("memfd");
	rw.window = xmmap(rw.file_pages * PAGE, PROT_READ | PROT_WRITE,
			  MAP_SHARED | MAP_NORESERVE, rw.fd, 0);
	rw.base = xmmap(ncols * pages * PAGE, PROT_READ | PROT_WRITE,
			MAP_SHARED, rw.fd, 0);
	rw.pt = malloc(ncols * pages * sizeof(uint32_t));
	if (!rw.pt)
		die("malloc");
	for (i = 0; i < ncols * pages; i++) {
		rw.pt[i] = i;
		*(uint64_t *)(rw.base + i * PAGE) = i;
	}
	rw.cow_count = 0;
	sigaction(SIGSEGV, &sa, NULL);
}

static void rw_fini(void)
{
	munmap(rw.base, rw.ncols * rw.pages * PAGE);
	munmap(rw.window, rw.file_pages * PAGE);
	close(rw.fd);
	free(rw.pt);
	memset(&rw, 0, sizeof(rw));
	signal(SIGSEGV, SIG_DFL);
}

/* Number of runs of consecutive file pages (= VMAs) in column c. */
static long rw_runs(long c)
{
	uint32_t *pt = rw.pt + c * rw.pages;
	long i, runs = 1;

	for (i = 1; i < rw.pages; i++)
		runs += pt[i] != pt[i - 1] + 1;
	return runs;
}

/*
 * Snapshot columns [0, ncols): map every run read-only into a fresh area,
 * then write-protect the source columns so that the next write to each
 * page is caught and copied.
 */
static char *rw_snapshot(long ncols)
{
	char *s = xmmap(ncols * rw.pages * PAGE, PROT_NONE,
			MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	long c, i, start;

	for (c = 0; c < ncols; c++) {
		uint32_t *pt = rw.pt + c * rw.pages;
		char *dst = s + c * rw.pages * PAGE;

		for (start = 0, i = 1; i <= rw.pages; i++) {
			if (i < rw.pages && pt[i] == pt[i - 1] + 1)
				continue;
			if (mmap(dst + start * PAGE, (i - start) * PAGE,
				 PROT_READ, MAP_SHARED | MAP_FIXED, rw.fd,
				 (off_t)pt[start] * PAGE) == MAP_FAILED)
				die("rewiring mmap (vm.max_map_count?)");
			start = i;
		}
		if (mprotect(rw.base + c * rw.pages * PAGE, rw.pages * PAGE,
			     PROT_READ))
			die("rewiring mprotect");
	}
	return s;
}

/* Give back file pages referenced by nothing (after dropping snapshots). */
static void rw_trim(void)
{
	static uint8_t *used;
	long i, start;

	used = calloc(rw.file_pages, 1);
	if (!used)
		die("calloc");
	for (i = 0; i < rw.ncols * rw.pages; i++)
		used[rw.pt[i]] = 1;
	for (start = -1, i = 0; i <= rw.file_pages; i++) {
		bool u = i == rw.file_pages || used[i];

		if (!u && start < 0)
			start = i;
		if (u && start >= 0) {
			fallocate(rw.fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
				  start * PAGE, (i - start) * PAGE);
			start = -1;
		}
	}
	free(used);
}

/* ---------------------------------------------------------------- swcow */

/*
 * Pages come from a pool; ref[page] counts the page tables (the live
 * column and snapshots) that point at it.
 */
struct sw_state {
	char *pool;
	uint32_t *ref;
	long pool_pages, next_free;
	uint32_t *free_list;
	long nfree;
	long ncols, pages;
	uint32_t *pt;		/* live columns */
};

static struct sw_state sw;

static uint32_t sw_alloc(void)
{
	if (sw.nfree)
		return sw.free_list[--sw.nfree];
	if (sw.next_free >= sw.pool_pages) {
		fprintf(stderr, "swcow: pool exhausted\n");
		exit(1);
	}
	return sw.next_free++;
}

static void sw_put(uint32_t p)
{
	if (--sw.ref[p] == 0)
		sw.free_list[sw.nfree++] = p;
}

static void sw_init(long ncols, long pages, long extra_pages)
{
	long i;

	sw.ncols = ncols;
	sw.pages = pages;
	sw.pool_pages = ncols * pages + extra_pages;
	sw.pool = xmmap(sw.pool_pages * PAGE, PROT_READ | PROT_WRITE,
			MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	madvise(sw.pool, sw.pool_pages * PAGE, MADV_NOHUGEPAGE);
	sw.ref = calloc(sw.pool_pages, sizeof(uint32_t));
	sw.free_list = malloc(sw.pool_pages * sizeof(uint32_t));
	sw.pt = malloc(ncols * pages * sizeof(uint32_t));
	if (!sw.ref || !sw.free_list || !sw.pt)
		die("malloc");
	sw.next_free = 0;
	sw.nfree = 0;
	for (i = 0; i < ncols * pages; i++) {
		sw.pt[i] = sw_alloc();
		sw.ref[sw.pt[i]] = 1;
		*(uint64_t *)(sw.pool + (size_t)sw.pt[i] * PAGE) = i;
	}
}

static void sw_fini(void)
{
	munmap(sw.pool, sw.pool_pages * PAGE);
	free(sw.ref);
	free(sw.free_list);
	free(sw.pt);
	memset(&sw, 0, sizeof(sw));
}

/* Snapshot columns [0, ncols): copy the page tables, take references. */
static uint32_t *sw_snapshot(long ncols)
{
	long n = ncols * sw.pages, i;
	uint32_t *s = malloc(n * sizeof(uint32_t));

	if (!s)
		die("malloc");
	memcpy(s, sw.pt, n * sizeof(uint32_t));
	for (i = 0; i < n; i++)
		sw.ref[s[i]]++;
	return s;
}

static void sw_drop(uint32_t *s, long ncols)
{
	long i;

	for (i = 0; i < ncols * sw.pages; i++)
		sw_put(s[i]);
	free(s);
}

/* Write one word to page idx of the live table, copying a shared page. */
static void sw_write(long idx, uint64_t v)
{
	uint32_t p = sw.pt[idx];

	if (sw.ref[p] > 1) {
		uint32_t np = sw_alloc();

		memcpy(sw.pool + (size_t)np * PAGE, sw.pool + (size_t)p * PAGE,
		       PAGE);
		sw.ref[np] = 1;
		sw_put(p);
		sw.pt[idx] = p = np;
	}
	write_word(sw.pool + (size_t)p * PAGE, v);
}

/* ----------------------------------------------------------------- fork */

struct fork_snap {
	pid_t pid;
};

/* The child is the snapshot; it waits until it is killed. */
static struct fork_snap fork_snapshot(void)
{
	struct fork_snap s;

	s.pid = fork();
	if (s.pid < 0)
		die("fork");
	if (s.pid == 0) {
		for (;;)
			pause();
	}
	return s;
}

static void fork_drop(struct fork_snap s)
{
	kill(s.pid, SIGKILL);
	waitpid(s.pid, NULL, 0);
}

/* --------------------------------------------------------------- table1 */

static long scaled(long m)
{
	long v = m * col_pages / 51200;

	return v > col_pages ? col_pages : v;
}

/* Write m distinct random pages of each of the first ncols columns. */
static void pick_pages(long *idx, long n, long m)
{
	long i;

	for (i = 0; i < n; i++)
		idx[i] = i;
	for (i = 0; i < m && i < n; i++) {	/* partial Fisher-Yates */
		long j = i + rnd() % (n - i), t = idx[i];

		idx[i] = idx[j];
		idx[j] = t;
	}
}

static void table1_memcpy(char *t)
{
	int ci, r;

	for (ci = 0; ci < n_snap_cols; ci++) {
		int p = snap_cols[ci];

		for (r = 0; r < reps; r++) {
			uint64_t total = 0;
			int c;

			/*
			 * One column at a time: allocate fresh memory and copy
			 * (timed), then unmap (not timed).  Same work as one
			 * p-column copy without holding p copies at once.
			 */
			for (c = 0; c < p; c++) {
				uint64_t t0 = now_ns();
				char *d = xmmap(col_pages * PAGE,
						PROT_READ | PROT_WRITE,
						MAP_PRIVATE | MAP_ANONYMOUS,
						-1, 0);

				madvise(d, col_pages * PAGE, MADV_NOHUGEPAGE);
				memcpy(d, t + c * col_pages * PAGE,
				       col_pages * PAGE);
				total += now_ns() - t0;
				munmap(d, col_pages * PAGE);
			}
			row("table1", "memcpy", p, 0, 1, r, total);
		}
	}
}

static void table1_fork(void)
{
	int ci, r;

	for (ci = 0; ci < n_snap_cols; ci++) {
		for (r = 0; r < reps; r++) {
			uint64_t t0 = now_ns();
			struct fork_snap s = fork_snapshot();
			uint64_t ns = now_ns() - t0;

			fork_drop(s);
			row("table1", "fork", snap_cols[ci], 0, 1, r, ns);
		}
	}
}

static void table1_vm_snapshot(char *t, const char *method)
{
	int ci, mi, r, c;
	long *idx = malloc(col_pages * sizeof(long));

	for (mi = 0; mi < n_mods; mi++) {
		long m = scaled(mods[mi]);

		if (mi && mi != n_mods - 1)
			continue;	/* independent of m: first and last */
		if (m) {
			/* m copy-on-write faults per column against a snapshot */
			for (c = 0; c < table_cols; c++) {
				char *col = t + c * col_pages * PAGE;
				char *s = vm_snapshot(NULL, col,
						      col_pages * PAGE);
				long i;

				if (s == MAP_FAILED)
					die("vm_snapshot");
				pick_pages(idx, col_pages, m);
				for (i = 0; i < m; i++)
					write_word(col + idx[i] * PAGE, i);
				munmap(s, col_pages * PAGE);
			}
		}
		for (ci = 0; ci < n_snap_cols; ci++) {
			int p = snap_cols[ci];

			for (r = 0; r < reps; r++) {
				char *s[64];
				uint64_t t0 = now_ns(), ns;

				for (c = 0; c < p; c++) {
					s[c] = vm_snapshot(NULL,
						t + c * col_pages * PAGE,
						col_pages * PAGE);
					if (s[c] == MAP_FAILED)
						die("vm_snapshot");
				}
				ns = now_ns() - t0;
				for (c = 0; c < p; c++)
					munmap(s[c], col_pages * PAGE);
				row("table1", method, p, m, 1, r, ns);
			}
		}
	}
	free(idx);
}

static void table1_rewiring(void)
{
	int ci, mi, r;
	long c, i, prev_m = 0, max_m = scaled(mods[n_mods - 1]);
	long *idx = malloc(col_pages * sizeof(long));

	/* copies are never reused: room for max_m per column */
	rw_init(table_cols, col_pages, table_cols * max_m + 64);
	for (mi = 0; mi < n_mods; mi++) {
		long m = scaled(mods[mi]);

		/*
		 * Bring every column to m modified pages: write-protect it
		 * (as a snapshot does), write to pages not modified yet (each
		 * write is copied to a new file page and remapped), and give
		 * back the file pages nothing references any more.  Column by
		 * column, to bound the memory held by copies.
		 */
		for (c = 0; c < table_cols && m > prev_m; c++) {
			char *col = rw.base + c * col_pages * PAGE;
			long done = 0;

			mprotect(col, col_pages * PAGE, PROT_READ);
			pick_pages(idx, col_pages, col_pages);
			for (i = 0; i < col_pages && done < m - prev_m; i++) {
				long g = c * col_pages + idx[i];

				if (rw.pt[g] != (uint32_t)g)
					continue;	/* modified already */
				write_word(col + idx[i] * PAGE, i);
				done++;
			}
			rw_trim();
		}
		prev_m = m;
		for (ci = 0; ci < n_snap_cols; ci++) {
			int p = snap_cols[ci];
			long vmas = 0;

			for (c = 0; c < p; c++)
				vmas += rw_runs(c);
			vmas /= p;
			for (r = 0; r < reps; r++) {
				uint64_t t0 = now_ns(), ns;
				char *snap = rw_snapshot(p);

				ns = now_ns() - t0;
				munmap(snap, p * col_pages * PAGE);
				row("table1", "rewiring", p, m, vmas, r, ns);
			}
		}
	}
	rw_fini();
	free(idx);
}

static void table1_swcow(void)
{
	int ci, mi, r;
	long c, i, max_m = scaled(mods[n_mods - 1]);
	long *idx = malloc(col_pages * sizeof(long));

	sw_init(table_cols, col_pages, max_m + col_pages);
	for (mi = 0; mi < n_mods; mi++) {
		long m = scaled(mods[mi]);

		if (mi && mi != n_mods - 1)
			continue;	/* independent of m: first and last */
		if (m) {
			for (c = 0; c < table_cols; c++) {
				uint32_t *s = sw_snapshot(table_cols);

				pick_pages(idx, col_pages, m);
				for (i = 0; i < m; i++)
					sw_write(c * col_pages + idx[i], i);
				sw_drop(s, table_cols);
			}
		}
		for (ci = 0; ci < n_snap_cols; ci++) {
			int p = snap_cols[ci];

			for (r = 0; r < reps; r++) {
				uint64_t t0 = now_ns(), ns;
				uint32_t *s = sw_snapshot(p);

				ns = now_ns() - t0;
				sw_drop(s, p);
				row("table1", "swcow", p, m, 1, r, ns);
			}
		}
	}
	sw_fini();
	free(idx);
}

/* ----------------------------------------------------------------- fig4 */

static bool is_sample(long w)
{
	if (w == 0 || w == fig4_pages)
		return true;
	if (w < fig4_dense)
		return w % 32 == 0;
	return w % fig4_step == 0;
}

/*
 * Write one word to each page of a column, in a random order; after the
 * write counts chosen by is_sample(), take a new snapshot (timed) and drop
 * the previous one.  A snapshot is alive during every write, so every
 * write is a first write to a shared page.
 */
static void fig4(const char *method)
{
	long n = fig4_pages, w, *order = malloc(n * sizeof(long));
	uint64_t wsum = 0;
	long wcount = 0;
	char *col = NULL, *snap = NULL;
	uint32_t *swsnap = NULL;
	struct fork_snap fs = { 0 };
	bool is_rw = !strcmp(method, "rewiring");
	bool is_sw = !strcmp(method, "swcow");

	pick_pages(order, n, n);
	if (is_rw) {
		rw_init(1, n, n + 64);
		col = rw.base;
	} else if (is_sw) {
		sw_init(1, n, 2 * n + 64);
	} else if (!strcmp(method, "vm_snapshot_shared")) {
		col = shared_table(1, n);
	} else {
		col = anon_table(1, n);
	}
	for (w = 0; w <= n; w++) {
		if (w) {
			uint64_t t0 = now_ns();

			if (is_sw)
				sw_write(order[w - 1], w);
			else
				write_word(col + order[w - 1] * PAGE, w);
			wsum += now_ns() - t0;
			wcount++;
		}
		if (!is_sample(w))
			continue;
		if (wcount)
			row("fig4_write", method, 1, w, is_rw ? rw_runs(0) : 1,
			    w, wsum / wcount);
		wsum = wcount = 0;
		{
			uint64_t t0 = now_ns(), ns;
			void *old = snap;
			uint32_t *oldsw = swsnap;
			struct fork_snap oldfs = fs;

			if (!strcmp(method, "memcpy")) {
				snap = xmmap(n * PAGE, PROT_READ | PROT_WRITE,
					     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
				madvise(snap, n * PAGE, MADV_NOHUGEPAGE);
				memcpy(snap, col, n * PAGE);
			} else if (!strcmp(method, "fork")) {
				fs = fork_snapshot();
			} else if (is_rw) {
				snap = rw_snapshot(1);
			} else if (is_sw) {
				swsnap = sw_snapshot(1);
			} else {
				snap = vm_snapshot(NULL, col, n * PAGE);
				if (snap == MAP_FAILED)
					die("vm_snapshot");
			}
			ns = now_ns() - t0;
			row("fig4_snapshot", method, 1, w,
			    is_rw ? rw_runs(0) : 1, w, ns);
			if (old)
				munmap(old, n * PAGE);
			if (oldsw)
				sw_drop(oldsw, 1);
			if (oldfs.pid)
				fork_drop(oldfs);
		}
	}
	if (snap)
		munmap(snap, n * PAGE);
	if (swsnap)
		sw_drop(swsnap, 1);
	if (fs.pid)
		fork_drop(fs);
	if (is_rw)
		rw_fini();
	else if (is_sw)
		sw_fini();
	else
		munmap(col, n * PAGE);
	free(order);
}

/* ----------------------------------------------------------------- main */

static long col_pages_for(const char *exp)
{
	return !strncmp(exp, "fig4", 4) ? fig4_pages : col_pages;
}

static long saved_map_count;

static void restore_map_count(void)
{
	FILE *f = fopen("/proc/sys/vm/max_map_count", "w");

	if (f) {
		fprintf(f, "%ld\n", saved_map_count);
		fclose(f);
	}
}

/* Raise vm.max_map_count (root only) for rewiring; restored at exit. */
static void raise_map_count(long need)
{
	FILE *f = fopen("/proc/sys/vm/max_map_count", "r+");
	long cur = 0;

	if (!f)
		return;
	if (fscanf(f, "%ld", &cur) == 1 && cur < need) {
		rewind(f);
		if (fprintf(f, "%ld\n", need) > 0 && fflush(f) == 0) {
			saved_map_count = cur;
			atexit(restore_map_count);
			fprintf(stderr, "# vm.max_map_count %ld -> %ld "
				"(restored at exit)\n", cur, need);
		}
	}
	fclose(f);
}

static int parse_list(const char *s, long *v, int max)
{
	int n = 0;

	while (*s && n < max) {
		v[n++] = strtol(s, (char **)&s, 10);
		if (*s == ',')
			s++;
	}
	return n;
}

static void usage(void)
{
	fprintf(stderr,
"usage: snapshot_micro [options]\n"
"  -p PAGES     pages per column for table1 (default 51200 = 200 MB)\n"
"  -t COLS      columns in the table (default 50)\n"
"  -c LIST      numbers of columns to snapshot (default 1,25,50)\n"
"  -m LIST      modified pages per column at 51,200 pages, scaled to -p\n"
"               (default 0,500,5000,50000)\n"
"  -r N         repetitions (default 3)\n"
"  -f PAGES     column pages for fig4 (default 51200)\n"
"  -s STEP      fig4: sample every STEP writes (default 512; every 32\n"
"               below -d)\n"
"  -d N         fig4: dense sampling below N writes (default 2048)\n"
"  -M LIST      methods (memcpy,fork,rewiring,swcow,vm_snapshot,\n"
"               vm_snapshot_shared)\n"
"  -x table1|fig4   run only one experiment\n"
"  -e NAME      environment label for the CSV (default host)\n"
"  -o FILE      output CSV (default stdout)\n");
	exit(2);
}

int main(int argc, char **argv)
{
	long v[8];
	int opt, i;
	bool have_vms = vm_snapshot_detect() >= 0;
	bool have_shared = vm_snapshot_shared_memfd();
	struct utsname u;
	char *t;

	out = stdout;
	while ((opt = getopt(argc, argv, "p:t:c:m:r:f:s:d:M:x:e:o:h")) != -1) {
		switch (opt) {
		case 'p': col_pages = atol(optarg); break;
		case 't': table_cols = atoi(optarg); break;
		case 'c':
			n_snap_cols = parse_list(optarg, v, 8);
			for (i = 0; i < n_snap_cols; i++)
				snap_cols[i] = v[i];
			break;
		case 'm': n_mods = parse_list(optarg, mods, 8); break;
		case 'r': reps = atoi(optarg); break;
		case 'f': fig4_pages = atol(optarg); break;
		case 's': fig4_step = atol(optarg); break;
		case 'd': fig4_dense = atol(optarg); break;
		case 'M': only_methods = optarg; break;
		case 'x':
			run_table1 = !strcmp(optarg, "table1");
			run_fig4 = !strcmp(optarg, "fig4");
			break;
		case 'e': env_name = optarg; break;
		case 'o':
			out = fopen(optarg, "w");
			if (!out)
				die(optarg);
			break;
		default: usage();
		}
	}
	for (i = 0; i < n_snap_cols; i++)
		if (snap_cols[i] > table_cols || snap_cols[i] > 64)
			usage();
	uname(&u);
	fprintf(out, "# snapshot_micro env=%s kernel=%s cpus=%ld col_pages=%ld "
		"table_cols=%d fig4_pages=%ld reps=%d vm_snapshot=%s\n",
		env_name, u.release, sysconf(_SC_NPROCESSORS_ONLN), col_pages,
		table_cols, fig4_pages, reps, have_vms ? "yes" : "no");
	fprintf(out, "experiment,env,method,cols,col_pages,modified,vmas,x,ns\n");
	/* rewiring needs a VMA per run of pages, twice (column + snapshot) */
	raise_map_count(2 * (table_cols * (scaled(mods[n_mods - 1]) * 2 + 2) +
			     fig4_pages) + 65536);

	if (run_table1) {
		t = anon_table(table_cols, col_pages);
		if (method_on("memcpy"))
			table1_memcpy(t);
		if (method_on("fork"))
			table1_fork();
		if (have_vms && method_on("vm_snapshot"))
			table1_vm_snapshot(t, "vm_snapshot");
		munmap(t, table_cols * col_pages * PAGE);
		if (have_shared && method_on("vm_snapshot_shared")) {
			t = shared_table(table_cols, col_pages);
			table1_vm_snapshot(t, "vm_snapshot_shared");
			munmap(t, table_cols * col_pages * PAGE);
		}
		if (method_on("swcow"))
			table1_swcow();
		if (method_on("rewiring"))
			table1_rewiring();
	}
	if (run_fig4) {
		const char *m[] = { "vm_snapshot", "vm_snapshot_shared",
				    "rewiring", "swcow", "fork", "memcpy" };

		for (i = 0; i < 6; i++) {
			if (!method_on(m[i]))
				continue;
			if (!strcmp(m[i], "vm_snapshot") && !have_vms)
				continue;
			if (!strcmp(m[i], "vm_snapshot_shared") && !have_shared)
				continue;
			fig4(m[i]);
		}
	}
	return 0;
}
