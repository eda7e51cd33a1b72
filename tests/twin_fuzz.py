#!/usr/bin/env python3
"""Random transactions against twin tables, for tests/twin_fuzz.sh.

    twin_fuzz.py SEED TRANSACTIONS > script.sql

Every transaction makes the same changes to `fa` (anker) and `fh` (heap), in
one transaction: in-place updates (of columns no index uses), updates of an
indexed column (a new row id), deletes, INSERT ... ON CONFLICT, row locks,
savepoints released and rolled back to, and an end drawn from COMMIT,
ROLLBACK, PREPARE TRANSACTION with COMMIT PREPARED or ROLLBACK PREPARED.
Between transactions, now and then, VACUUM, VACUUM FULL, CLUSTER, ANALYZE or
REINDEX of the anker twin. A statement that fails aborts both twins' changes.
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
for t in ("fa", "fh"):
    out.append(f"INSERT INTO {t} SELECT g, g % 50, g, 's' || g FROM generate_series(1, 300) g;")
for n in range(count):
    if rng.random() < 0.05:
        out.append(rng.choice(["VACUUM fa;", "VACUUM FULL fa;", "CLUSTER fa USING fa_pkey;", "ANALYZE fa;", "REINDEX TABLE fa;"]))
        continue
    body, depth = [], 0
    for _ in range(rng.randint(1, 8)):
        x, i = rng.random(), rng.randint(1, 350)
        if x < 0.3:
            change = f"UPDATE {{t}} SET v = v + {rng.randint(1, 9)}, s = s || 'x' WHERE id % 37 = {i % 37};"
        elif x < 0.45:
            change = f"UPDATE {{t}} SET k = k + 1 WHERE id = {i};"
        elif x < 0.55:
            change = f"DELETE FROM {{t}} WHERE id = {i};"
        elif x < 0.7:
            change = f"INSERT INTO {{t}} VALUES ({i}, {i % 50}, 0, 'i') ON CONFLICT (id) DO UPDATE SET v = {{t}}.v * 2;"
        elif x < 0.8:
            change = f"SELECT 1 FROM {{t}} WHERE id = {i} FOR UPDATE;"
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
        out.append("BEGIN;" + "".join(body) + f"PREPARE TRANSACTION 'fuzz{n}';")
        out.append(f"{end.upper()} 'fuzz{n}';")
    else:
        out.append("BEGIN;" + "".join(body) + end)
print("\n".join(out))
