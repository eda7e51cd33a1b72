#!/usr/bin/env python3
"""Random transactions against twin tables, for tests/twin_fuzz.sh.

    twin_fuzz.py SEED TRANSACTIONS > script.sql

Every transaction makes the same changes to `fa` (anker) and `fh` (heap), in
one transaction: in-place updates (of columns no index uses), updates of an
indexed column (a new row id), deletes, INSERT ... ON CONFLICT, COPY (the
multi-row insert path), values long enough for blobs and TOAST, NULLs, row
locks, savepoints released and rolled back to, and an end drawn from COMMIT,
ROLLBACK, PREPARE TRANSACTION with COMMIT PREPARED or ROLLBACK PREPARED;
now and then an image of the anker twin is written in the middle of one
(`anker.compact`, which then holds uncommitted rows). Between transactions,
now and then, VACUUM, VACUUM FULL, CLUSTER, ANALYZE, REINDEX or an image of
the anker twin, or the same schema change of both twins in one transaction:
ADD or DROP COLUMN, ALTER COLUMN ... TYPE (a rewrite), TRUNCATE and a new
load. A statement that fails aborts both twins' changes.
"""
import random
import sys

rng = random.Random(int(sys.argv[1]))
count = int(sys.argv[2])
out = [
    "DROP TABLE IF EXISTS fa, fh;",
    "CREATE TABLE fa (id int PRIMARY KEY, k int, v int, s text) USING anker;",
    "CREATE TABLE fh (id int PRIMARY KEY, k int, v int, s text) USING heap;",
    "CREATE INDEX fa_k ON fa (k); CREATE INDEX fh_k ON fh (k);",
]
HALF = "-- half"  # tests/twin_fuzz.sh splits the script here
LOAD = "INSERT INTO {t} (id, k, v, s) SELECT g, g % 50, g, 's' || g FROM generate_series(1, 300) g;"
COMPACT = "SELECT count(*) FROM anker.compact('fa');"
for t in ("fa", "fh"):
    out.append(LOAD.format(t=t))
has_n = False  # the twins have a column n int (added, later dropped)


def both(*statements):
    """One transaction that applies each statement to both twins."""
    return "BEGIN;" + "".join(s.format(t=t) for s in statements for t in ("fa", "fh")) + "COMMIT;"


for n in range(count):
    if n == count // 2:
        out.append(HALF)
    x = rng.random()
    if x < 0.05:
        out.append(rng.choice(["VACUUM fa;", "VACUUM FULL fa;", "CLUSTER fa USING fa_pkey;", "ANALYZE fa;",
                               "REINDEX TABLE fa;", COMPACT]))
        continue
    if x < 0.08:
        y = rng.random()
        if y < 0.35:
            if has_n:
                out.append(both("ALTER TABLE {t} DROP COLUMN n;"))
            else:
                out.append(both(f"ALTER TABLE {{t}} ADD COLUMN n int DEFAULT {rng.randint(1, 9)};"))
            has_n = not has_n
        elif y < 0.85:
            # (back to int fails for both twins once a value outgrows it)
            out.append(both(f"ALTER TABLE {{t}} ALTER COLUMN v TYPE {rng.choice(['bigint', 'int', 'numeric'])};"))
        else:
            out.append(both("TRUNCATE {t};", LOAD))
        continue
    body, depth = [], 0
    if rng.random() < 0.1:
        # COPY first in its transaction, so that it never meets an aborted
        # one (psql would read its rows as commands); ids of its own.
        rows = "".join(f"{10000 + n * 10 + j}\t{j}\t{j}\t{'c' * rng.randint(0, 3000)}\n"
                       for j in range(rng.randint(1, 4)))
        for t in ("fa", "fh"):
            body.append(f"COPY {t} (id, k, v, s) FROM stdin;\n{rows}\\.\n")
    for _ in range(rng.randint(1, 8)):
        x, i = rng.random(), rng.randint(1, 350)
        if x < 0.25:
            change = f"UPDATE {{t}} SET v = v + {rng.randint(1, 9)}, s = s || 'x' WHERE id % 37 = {i % 37};"
        elif x < 0.3:
            s = rng.choice(["NULL", f"repeat('y', {rng.randint(50, 5000)})", "'z'"])
            change = f"UPDATE {{t}} SET s = {s} WHERE id % 13 = {i % 13};"
        elif x < 0.33 and has_n:
            change = f"UPDATE {{t}} SET n = n + 1 WHERE id % 11 = {i % 11};"
        elif x < 0.45:
            change = f"UPDATE {{t}} SET k = k + 1 WHERE id = {i};"
        elif x < 0.55:
            change = f"DELETE FROM {{t}} WHERE id = {i};"
        elif x < 0.7:
            change = f"INSERT INTO {{t}} (id, k, v, s) VALUES ({i}, {i % 50}, 0, 'i') ON CONFLICT (id) DO UPDATE SET v = {{t}}.v * 2;"
        elif x < 0.78:
            change = f"SELECT 1 FROM {{t}} WHERE id = {i} FOR UPDATE;"
        elif x < 0.8:
            body.append(COMPACT)
            continue
        elif x < 0.9:
            body.append(f"SAVEPOINT s{depth};")
            depth += 1
            continue
        else:
            if depth > 0:
                d = rng.randint(0, depth - 1)
                if rng.random() < 0.5:
                    body.append(f"ROLLBACK TO SAVEPOINT s{d};")
                    depth = d + 1
                else:
                    body.append(f"RELEASE SAVEPOINT s{d};")
                    depth = d
            continue
        body.append(change.format(t="fa"))
        body.append(change.format(t="fh"))
    end = rng.choice(["COMMIT;", "COMMIT;", "COMMIT;", "ROLLBACK;", "commit prepared", "rollback prepared"])
    if end.endswith("prepared"):
        out.append("BEGIN;\n" + "\n".join(body) + f"\nPREPARE TRANSACTION 'fuzz{n}';")
        out.append(f"{end.upper()} 'fuzz{n}';")
    else:
        out.append("BEGIN;\n" + "\n".join(body) + "\n" + end)
print("\n".join(out))
