import { packTarSync, readTarEntries, tarHeader, TarReader, TAR_BLOCK, TAR_END } from './index';

async function* chunks(b: Buffer, size = 100): AsyncGenerator<Uint8Array> {
  for (let i = 0; i < b.length; i += size) yield b.subarray(i, i + size);
}

async function all(b: Buffer, keep = 1 << 20, max = 1 << 24) {
  const out = [];
  for await (const r of readTarEntries(chunks(b), { maxArchiveBytes: max, keep: () => keep }))
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
    await expect(all(tar, 10, 1024)).rejects.toMatchObject({ code: 'TAR_INVALID', details: { limit: 1024 } });
  });

  it('refuses corrupt headers and truncated archives', async () => {
    const tar = packTarSync([{ path: 'x', type: 'file', mode: 0o644, content: 'hello world' }]);
    const bad = Buffer.from(tar);
    bad[10] = 0x41;
    await expect(all(bad)).rejects.toMatchObject({ code: 'TAR_INVALID', message: expect.stringContaining('checksum') });
    const cut = Buffer.concat([tarHeader({ path: 'x', type: 'file', mode: 0o644, size: 5000 }), Buffer.alloc(1024)]);
    await expect(all(cut)).rejects.toMatchObject({ code: 'TAR_INVALID' });
    expect(await all(TAR_END)).toEqual([]);
  });

  /** `entry` with its type flag replaced and the checksum made right again. */
  function withFlag(entry: Buffer, flag: string): Buffer {
    const h = Buffer.from(entry);
    h.write(flag, 156, 'latin1');
    h.fill(0x20, 148, 156);
    let sum = 0;
    for (let i = 0; i < TAR_BLOCK; i++) sum += h[i] as number;
    h.write(sum.toString(8).padStart(6, '0') + '\0 ', 148, 'latin1');
    return h;
  }

  it('passes an unknown entry type through as other when reading entries, and refuses it in the strict reader', async () => {
    const sparse = withFlag(packTarSync([{ path: 's', type: 'file', mode: 0o644, content: 'abc' }]), 'S');
    const r = await all(sparse);
    expect(r).toMatchObject([{ path: 's', type: 'other', flag: 'S', size: 0 }]);
    const strict = new TarReader(chunks(sparse));
    await expect(strict.next()).rejects.toMatchObject({ code: 'TAR_INVALID', message: expect.stringContaining('unsupported tar entry type "S"') });
  });

  it('bounds metadata entries by the bound it is given', async () => {
    const long = packTarSync([{ path: 'n'.repeat(5000), type: 'file', mode: 0o644, content: 'x' }]);
    expect((await all(long))[0]?.path).toBe('n'.repeat(5000));
    const reader = new TarReader(chunks(long), { maxMetaBytes: 1000 });
    await expect(reader.next()).rejects.toMatchObject({ code: 'TAR_INVALID', message: expect.stringContaining('over the limit of 1000') });
  });

  it('reports errors through the caller s factory', async () => {
    const bad = Buffer.from(packTarSync([{ path: 'x', type: 'file', mode: 0o644, content: 'y' }]));
    bad[0] = 0x7a;
    const reader = new TarReader(chunks(bad), { invalid: (message, details) => Object.assign(new Error(message), { code: 'MINE', details }) });
    await expect(reader.next()).rejects.toMatchObject({ code: 'MINE', details: { offset: 0 } });
  });

  it('closes the source when the caller stops early', async () => {
    let closed = false;
    const tar = packTarSync([
      { path: 'a', type: 'file', mode: 0o644, content: '1' },
      { path: 'b', type: 'file', mode: 0o644, content: '2' },
    ]);
    async function* source(): AsyncGenerator<Uint8Array> {
      try {
        yield* chunks(tar);
      } finally {
        closed = true;
      }
    }
    for await (const r of readTarEntries(source(), { maxArchiveBytes: 1 << 20 })) {
      expect(r.header.path).toBe('a');
      break;
    }
    expect(closed).toBe(true);
  });

  it('refuses an entry the writer cannot write, naming it', () => {
    expect(() => tarHeader({ path: '', type: 'file', mode: 0o644 })).toThrow(expect.objectContaining({ code: 'TAR_BAD_ENTRY' }));
    expect(() => tarHeader({ path: 'x', type: 'file', mode: 0o644, size: -1 })).toThrow(
      expect.objectContaining({ code: 'TAR_BAD_ENTRY', message: 'invalid size for x' }),
    );
  });
});
