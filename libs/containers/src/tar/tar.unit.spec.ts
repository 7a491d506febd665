import { packTarSync, readTar } from './tar';

async function* once(b: Buffer): AsyncGenerator<Uint8Array> {
  yield b;
}

async function drain(b: Buffer, max = 1 << 20): Promise<void> {
  for await (const r of readTar(once(b), { maxArchiveBytes: max, keep: () => 1 << 20 })) void r;
}

describe("the container runtime's tar reading", () => {
  it('reports malformed and oversized archives with the container runtime s codes', async () => {
    const tar = packTarSync([{ path: 'x', type: 'file', mode: 0o644, content: 'hello' }]);
    const bad = Buffer.from(tar);
    bad[3] = 0x41;
    await expect(drain(bad)).rejects.toMatchObject({ code: 'CONTAINER_ARCHIVE_INVALID', kind: 'integrity', message: expect.stringContaining('checksum') });
    await expect(drain(tar, 600)).rejects.toMatchObject({ code: 'CONTAINER_ARCHIVE_TOO_LARGE', kind: 'refused', details: { limit: 600 } });
    await expect(drain(tar)).resolves.toBeUndefined();
  });
});
