import { isAssayError } from '@assay/core';
import { compareNames, decodeUtf8Strict, displayBytes, findNfcCollision, validateEntryName } from './names';
import { compileExcludes, compilePattern } from './exclude';
import { classifySymlink, outsideSymlinks } from './symlinks';
import { DEFAULT_POLICY, policyDigest, policyDocument, resolvePolicy } from './policy';
import { ListingKey, RACY_MARGIN_NS, isClean, judgeCachedFile, recordedTimeNs, statSig, type CachedEntry, type SourceStat } from './stat-cache';
import { boundedPaths, isPlainJson } from './events';

function code(f: () => unknown): string {
  try {
    f();
  } catch (e) {
    return isAssayError(e) ? e.code : String(e);
  }
  return 'no error';
}

describe('names', () => {
  it('decodes only valid UTF-8', () => {
    expect(decodeUtf8Strict(Buffer.from('héllo'))).toBe('héllo');
    expect(decodeUtf8Strict(new Uint8Array([0x61, 0xff, 0x62]))).toBeNull();
    expect(decodeUtf8Strict(new Uint8Array([0xed, 0xa0, 0x80]))).toBeNull(); // an encoded surrogate
    expect(displayBytes(new Uint8Array([0x61, 0xff, 0x5c]))).toBe('a\\xff\\x5c');
  });

  it('validates entry names', () => {
    expect(validateEntryName('ok.txt')).toBeNull();
    expect(validateEntryName('')).toMatch(/empty/);
    expect(validateEntryName('.')).toMatch(/dot/);
    expect(validateEntryName('..')).toMatch(/dot/);
    expect(validateEntryName('a/b')).toMatch(/"\/"/);
    expect(validateEntryName('a\0')).toMatch(/NUL/);
    expect(validateEntryName('x'.repeat(256))).toMatch(/255/);
    expect(validateEntryName('é'.repeat(128))).toMatch(/255/); // 256 bytes
    expect(validateEntryName('\uD800x')).toMatch(/Unicode/);
  });

  it('finds names that collide under NFC', () => {
    expect(findNfcCollision(['a', 'b', 'é'])).toBeNull();
    expect(findNfcCollision(['caf\u00e9', 'cafe\u0301'])).toEqual(['caf\u00e9', 'cafe\u0301']);
    expect(findNfcCollision(['A', 'a'])).toBeNull(); // case is not folded
  });

  it('orders names by UTF-8 bytes', () => {
    const names = ['b', 'a', '\uE000', '😀', 'é', 'Z', 'a b', '\uFFFD', '𝔸'];
    const bytes = [...names].sort((x, y) => Buffer.compare(Buffer.from(x), Buffer.from(y)));
    expect([...names].sort(compareNames)).toEqual(bytes);
  });
});

describe('exclude patterns', () => {
  const m = compileExcludes(['*.pyc', '__pycache__/', '/build', 'data/raw/*.bin', '**/tmp/**', 'logs/**/*.log', 'a?c', '[!x]y']);
  it.each([
    ['x.pyc', false, true],
    ['deep/x.pyc', false, true],
    ['x.pyc.txt', false, false],
    ['src/__pycache__', true, true],
    ['src/__pycache__', false, false], // trailing slash: directories only
    ['build', true, true],
    ['sub/build', true, false], // anchored
    ['data/raw/a.bin', false, true],
    ['data/raw/sub/a.bin', false, false], // * does not cross /
    ['x/tmp/y', false, true],
    ['tmp/y', false, true],
    ['logs/a.log', false, true],
    ['logs/x/y/a.log', false, true],
    ['abc', false, true],
    ['a/c', false, false],
    ['zy', false, true],
    ['xy', false, false],
  ])('%s (dir %s) excluded: %s', (path, isDir, expected) => {
    expect(m(path, isDir)).toBe(expected);
  });

  it('treats regex characters literally and supports escapes', () => {
    expect(compileExcludes(['a+b(c).txt'])('a+b(c).txt', false)).toBe(true);
    expect(compileExcludes(['a+b(c).txt'])('aab(c).txt', false)).toBe(false);
    expect(compileExcludes(['\\*star'])('*star', false)).toBe(true);
    expect(compileExcludes(['\\*star'])('xstar', false)).toBe(false);
  });

  it('refuses negations and malformed patterns', () => {
    expect(code(() => compilePattern('!keep'))).toBe('SNAPSHOT_POLICY_INVALID');
    expect(code(() => compilePattern(''))).toBe('SNAPSHOT_POLICY_INVALID');
    expect(code(() => compilePattern('a/../b'))).toBe('SNAPSHOT_POLICY_INVALID');
    expect(code(() => compilePattern('trailing\\'))).toBe('SNAPSHOT_POLICY_INVALID');
  });
});

describe('symlink classification (lexical, through links recorded in the same snapshot)', () => {
  const links = new Map<string, string>([
    ['a/up', '../x'],
    ['a/out', '../../etc/passwd'],
    ['abs', '/etc/passwd'],
    ['sub/l1', '..'],
    ['sub/l2', 'l1/../..'],
    ['loop1', 'loop2'],
    ['loop2', 'loop1'],
    ['dangling', 'does/not/exist'],
    ['d/deep/link', '../../sub/l1/a/up'],
    ['d/deep/out', '../../sub/l1/../a'],
  ]);
  it.each([
    ['a/up', 'inside'],
    ['a/out', 'outside'],
    ['abs', 'outside'],
    ['sub/l1', 'inside'],
    ['sub/l2', 'outside'], // l1 -> '..' is the root; '..' from there climbs out
    ['loop1', 'outside'], // too many expansions: flagged
    ['dangling', 'inside'],
    ['d/deep/link', 'inside'],
    ['d/deep/out', 'outside'], // sub/l1 is the root, so its '..' is above it
  ])('%s is %s', (rel, expected) => {
    expect(classifySymlink(rel, links)).toBe(expected);
  });
  it('lists the outside ones sorted', () => {
    expect(outsideSymlinks(links)).toEqual(['a/out', 'abs', 'd/deep/out', 'loop1', 'loop2', 'sub/l2']);
  });
});

describe('policy', () => {
  it('fills in safe defaults', () => {
    expect(resolvePolicy({})).toEqual(DEFAULT_POLICY);
    expect(resolvePolicy({ maxFiles: 10, exclude: ['*.o'] })).toMatchObject({ maxFiles: 10, exclude: ['*.o'], specialFiles: 'refuse' });
  });

  it.each([
    [{ maxFiles: -1 }, /maxFiles/],
    [{ maxFiles: 1.5 }, /maxFiles/],
    [{ maxFileBytes: 2 ** 40 }, /maxFileBytes/],
    [{ exclude: 'x' }, /exclude/],
    [{ exclude: ['!x'] }, /negation/],
    [{ outsideSymlinks: 'follow' }, /outsideSymlinks/],
    [{ specialFiles: 'copy' }, /specialFiles/],
    [{ followSymlinks: true }, /unknown/],
  ])('refuses %j', (input, why) => {
    expect(() => resolvePolicy(input)).toThrow(why);
    expect(code(() => resolvePolicy(input))).toBe('SNAPSHOT_POLICY_INVALID');
  });

  it('has a digest that is a CID of the policy document and changes with any field', () => {
    const d = policyDigest(DEFAULT_POLICY);
    expect(d).toMatch(/^bafyrei[a-z2-7]{52}$/);
    expect(policyDigest(policyDocument(DEFAULT_POLICY))).toBe(d);
    expect(policyDigest(resolvePolicy({ maxFiles: 999 }))).not.toBe(d);
    expect(policyDigest(resolvePolicy({ exclude: ['x'] }))).not.toBe(d);
    expect(isPlainJson(policyDocument(DEFAULT_POLICY))).toBe(true);
  });
});

describe('stat cache rules', () => {
  const st = (over: Partial<SourceStat> = {}): SourceStat => ({
    kind: 'file',
    size: 10,
    mode: 0o100644,
    dev: 1n,
    ino: 2n,
    nlink: 1,
    mtimeNs: 1_000_000_000_000n,
    ctimeNs: 1_000_000_000_000n,
    ...over,
  });
  const entry = (s: SourceStat, clean = true): CachedEntry => ({ kind: 'file', sig: statSig(s), cid: 'bafk', mode: 0o644, size: s.size, clean, target: '' });

  it('hits only when device, inode, size, mode, mtime and ctime all match and the entry was clean', () => {
    const s = st();
    expect(judgeCachedFile(undefined, s)).toBe('miss');
    expect(judgeCachedFile(entry(s), s)).toBe('hit');
    for (const over of [{ dev: 9n }, { ino: 9n }, { size: 11 }, { mode: 0o100755 }, { mtimeNs: 1n }, { ctimeNs: 1n }]) {
      expect(judgeCachedFile(entry(s), st(over))).toBe('changed');
    }
    expect(judgeCachedFile(entry(s, false), s)).toBe('racy');
  });

  it('treats a file not strictly older than the recording time (minus the margin) as racily clean', () => {
    const start = new Date(1_000_000); // ms
    const rec = recordedTimeNs(start);
    expect(rec).toBe(1_000_000n * 1_000_000n - RACY_MARGIN_NS);
    expect(isClean(st({ mtimeNs: rec - 1n, ctimeNs: rec - 1n }), rec)).toBe(true);
    expect(isClean(st({ mtimeNs: rec, ctimeNs: rec - 1n }), rec)).toBe(false);
    expect(isClean(st({ mtimeNs: rec - 1n, ctimeNs: rec }), rec)).toBe(false);
    // back-dating mtime does not help: ctime is still recent
    expect(isClean(st({ mtimeNs: 0n, ctimeNs: rec + 5n }), rec)).toBe(false);
  });

  it('keys a listing by names and signatures', () => {
    const k1 = new ListingKey();
    k1.file('a', 'sig1');
    k1.symlink('l', 't');
    k1.dir('d', 'bafy', 3);
    const k2 = new ListingKey();
    k2.file('a', 'sig2');
    k2.symlink('l', 't');
    k2.dir('d', 'bafy', 3);
    expect(k1.filesKey()).not.toBe(k2.filesKey());
    expect(k1.dirsKey()).toBe(k2.dirsKey());
  });
});

describe('event helpers', () => {
  it('bounds path lists and says so', () => {
    const many = Array.from({ length: 150 }, (_, i) => `p${String(i).padStart(3, '0')}`);
    const b = boundedPaths(many.reverse());
    expect(b.count).toBe(150);
    expect(b.paths).toHaveLength(100);
    expect(b.paths[0]).toBe('p000');
    expect(b.truncated).toBe(true);
  });
  it('recognises plain JSON', () => {
    expect(isPlainJson({ a: [1, 'x', null, true, { b: 2 }] })).toBe(true);
    expect(isPlainJson({ a: undefined })).toBe(false);
    expect(isPlainJson({ a: 1n })).toBe(false);
    expect(isPlainJson({ a: NaN })).toBe(false);
    expect(isPlainJson(new Date())).toBe(false);
  });
});
