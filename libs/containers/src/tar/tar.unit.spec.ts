import { packTarSync, readTar, tarHeader, TAR_END } from './tar';

async function* chunks(b: Buffer, size = 100): AsyncGenerator<Uint8Array> {
  for (let i = 0; i < b.length; i += size) yield b.subarray(i, i + size);
}

async function all(b: Buffer, keep = 1 << 20, max = 1 << 24) {
  const out = [];
  for await (const r of readTar(chunks(b), { maxArchiveBytes: max, keep: () => keep }))
    out.push({ ...r.header, content: r.content?.toString('utf8') ?? null, tooLarge: r.tooLarge });
  return out;
}

describe('tar', () => {
  it('round-trips files, directories, symlinks and long names', async () => {
    const long = `${'d'.repeat(120)}/${'f'.repeat(150)}.txt`;
    const tar = packTarSync([
      { path: 'a', type: 'dir', mode: 0o755 },
      { path: 'a/x.txt', type: 'file', mode: 0o644, content: 'hello' },
      { path: 'a/run', type: 'file', mode: 0o755, content: '' },
      { path: 'link', type: 'symlink', mode: 0o777, linkTarget: '/tests' },
      { path: long, type: 'file', mode: 0o644, content: 'long' },
      { path: 'ünï', type: 'file', mode: 0o644, content: 'u' },
    ]);
    expect(tar.length % 512).toBe(0);
    const r = await all(tar);
    expect(r.map((e) => [e.path, e.type, e.mode, e.content])).toEqual([
      ['a/', 'dir', 0o755, ''],
      ['a/x.txt', 'file', 0o644, 'hello'],
      ['a/run', 'file', 0o755, ''],
      ['link', 'symlink', 0o777, ''],
      [long, 'file', 0o644, 'long'],
      ['ünï', 'file', 0o644, 'u'],
    ]);
    expect(r[3]?.linkTarget).toBe('/tests');
  });

  it('is deterministic', () => {
    const e = [{ path: 'x', type: 'file' as const, mode: 0o644, content: 'same' }];
    expect(packTarSync(e).equals(packTarSync(e))).toBe(true);
  });

  it('keeps only what is asked, within bounds', async () => {
    const tar = packTarSync([{ path: 'big', type: 'file', mode: 0o644, content: 'x'.repeat(2000) }]);
    expect(await all(tar, 10)).toMatchObject([{ path: 'big', content: null, tooLarge: true, size: 2000 }]);
    await expect(all(tar, 10, 1024)).rejects.toMatchObject({ code: 'CONTAINER_ARCHIVE_TOO_LARGE' });
  });

  it('refuses corrupt headers and truncated archives', async () => {
    const tar = packTarSync([{ path: 'x', type: 'file', mode: 0o644, content: 'hello world' }]);
    const bad = Buffer.from(tar);
    bad[10] = 0x41;
    await expect(all(bad)).rejects.toMatchObject({ code: 'CONTAINER_ARCHIVE_INVALID', message: expect.stringContaining('checksum') });
    const cut = Buffer.concat([tarHeader({ path: 'x', type: 'file', mode: 0o644, size: 5000 }), Buffer.alloc(1024)]);
    await expect(all(cut)).rejects.toMatchObject({ code: 'CONTAINER_ARCHIVE_INVALID' });
    expect(await all(TAR_END)).toEqual([]);
  });
});
