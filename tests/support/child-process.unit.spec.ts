/** onceOutput (tests/support/child-process.ts): the tests that act on a child's output line rely on it. */
import { PassThrough } from 'node:stream';
import { onceOutput } from './child-process';

describe('onceOutput', () => {
  it('sees a marker split across chunks, and fires once however often it comes again', () => {
    const s = new PassThrough();
    let fired = 0;
    onceOutput(s, '--- end ---', () => fired++);
    s.write('round 1\n--- e');
    expect(fired).toBe(0);
    s.write('nd');
    s.write(' ---\n');
    expect(fired).toBe(1);
    s.write('--- end ---\n');
    expect(fired).toBe(1);
  });

  it('does not fire for a near miss, a chunk at a time', () => {
    const s = new PassThrough();
    let fired = 0;
    onceOutput(s, 'agent command starting', () => fired++);
    for (const c of ['agent command', ' start', 'ed\n', 'agent  command starting\n']) s.write(c);
    expect(fired).toBe(0);
    s.write(Buffer.from('agent command starting\n'));
    expect(fired).toBe(1);
  });
});
