"""Hidden checker of data-contract. Reads the candidate's dataset as hostile input and writes <out>/reward.json:
{"reward": 1} when every rule holds, else {"reward": 0}, plus counts. Every failure is printed as

    FAIL <file>:<line>: <what is wrong>

(line 0 for the file as a whole), at most MAX_REPORTED of them, then one summary line. Values from the dataset are
never echoed beyond a short, escaped excerpt of an id.
"""
import argparse
import errno
import json
import os
import re
import stat
import sys

MAX_BYTES = 1024 * 1024
MAX_REPORTED = 50
FIELDS = ("id", "domain", "prompt", "answer")
EXPECTED = {"math": 20, "code": 15, "prose": 15}
ID_RE = re.compile(r"[a-z0-9-]{1,64}")


class Duplicate(Exception):
    pass


def strict_object(pairs):
    seen = {}
    for k, v in pairs:
        if k in seen:
            raise Duplicate(k)
        seen[k] = v
    return seen


def reject_constant(name):
    raise ValueError("%s is not JSON" % name)


def short(s, n=40):
    r = json.dumps(s, ensure_ascii=True)
    return r if len(r) <= n else r[: n - 4] + '..."'


def read_dataset(path):
    """The file's bytes, or (None, reason). Never follows a symlink; refuses anything but a regular file."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as e:
        if e.errno == errno.ENOENT:
            return None, "the file does not exist"
        if e.errno == errno.ELOOP:
            return None, "is a symbolic link; the contract needs a regular file"
        return None, "cannot be opened (%s)" % os.strerror(e.errno)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return None, "is not a regular file"
        chunks, size = [], 0
        while size <= MAX_BYTES:
            b = os.read(fd, 65536)
            if not b:
                break
            chunks.append(b)
            size += len(b)
        if size > MAX_BYTES:
            return None, "is larger than %d bytes" % MAX_BYTES
        return b"".join(chunks), None
    finally:
        os.close(fd)


def check(path):
    """Returns (failures, counts, records)."""
    name = os.path.basename(path)
    failures = []

    def fail(line, what):
        failures.append("%s:%d: %s" % (name, line, what))

    data, why = read_dataset(path)
    if data is None:
        fail(0, why)
        return failures, {}, 0
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        fail(0, "not UTF-8 (byte %d)" % e.start)
        return failures, {}, 0
    if text == "":
        fail(0, "the file is empty")
        return failures, {}, 0
    counts = {d: 0 for d in EXPECTED}
    ids = {}
    records = 0
    for n, line in enumerate(text.split("\n")[:-1] if text.endswith("\n") else text.split("\n"), start=1):
        if line.strip() == "":
            fail(n, "blank line")
            continue
        try:
            rec = json.loads(line, object_pairs_hook=strict_object, parse_constant=reject_constant)
        except Duplicate as e:
            fail(n, "duplicate key %s" % short(str(e)))
            continue
        except ValueError as e:
            fail(n, "not strict JSON (%s)" % str(e).split(":")[0])
            continue
        if not isinstance(rec, dict):
            fail(n, "not a JSON object")
            continue
        records += 1
        extra = sorted(k for k in rec if k not in FIELDS)
        if extra:
            fail(n, "unexpected field%s %s" % ("s" if len(extra) > 1 else "", ", ".join(short(k) for k in extra[:5])))
        for f in FIELDS:
            if f not in rec:
                fail(n, 'field "%s" is missing' % f)
            elif not isinstance(rec[f], str):
                fail(n, 'field "%s" must be a string, got %s' % (f, type(rec[f]).__name__ if rec[f] is not None else "null"))
        rid, dom, prompt, answer = (rec.get(f) for f in FIELDS)
        if isinstance(rid, str):
            if not ID_RE.fullmatch(rid):
                fail(n, 'field "id" %s must be 1 to 64 characters from a-z, 0-9 and -' % short(rid))
            elif rid in ids:
                fail(n, 'id %s is not unique (first on line %d)' % (short(rid), ids[rid]))
            else:
                ids[rid] = n
        if isinstance(dom, str):
            if dom in counts:
                counts[dom] += 1
            else:
                fail(n, 'field "domain" must be one of math, code, prose, got %s' % short(dom))
        if isinstance(prompt, str) and not (10 <= len(prompt) <= 2000 and prompt.strip()):
            fail(n, 'field "prompt" must be 10 to 2000 characters, not only whitespace (got %d)' % len(prompt))
        if isinstance(answer, str) and not (1 <= len(answer) <= 2000 and answer.strip()):
            fail(n, 'field "answer" must be 1 to 2000 characters, not only whitespace (got %d)' % len(answer))
    if not text.endswith("\n"):
        fail(text.count("\n") + 1, "the last line does not end with a newline")
    for dom, want in EXPECTED.items():
        if counts[dom] != want:
            fail(0, 'domain "%s" has %d records, the contract needs exactly %d' % (dom, counts[dom], want))
    return failures, counts, records


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dataset", required=True)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    failures, counts, records = check(a.dataset)
    for f in failures[:MAX_REPORTED]:
        print("FAIL " + f)
    if len(failures) > MAX_REPORTED:
        print("... and %d more failures" % (len(failures) - MAX_REPORTED))
    reward = 0 if failures else 1
    summary = ", ".join("%s %d" % (d, counts.get(d, 0)) for d in EXPECTED)
    if reward:
        print("PASS: %d records (%s); the dataset meets the contract" % (records, summary))
    else:
        print("reward 0: %d failure%s; %d records (%s)" % (len(failures), "" if len(failures) == 1 else "s", records, summary))
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "reward.json"), "w") as f:
        json.dump({"reward": reward, "records": records, "failures": len(failures)}, f, sort_keys=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
