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

  it('a RegExp matches whole lines only, on any of several streams, and fires once', () => {
    const out = new PassThrough();
    const err = new PassThrough();
    let fired = 0;
    onceOutput([out, err], /^agent\| up$/, () => fired++);
    out.write('agent| u'); // a line not yet ended is not tested: 'agent| u' + 'p-and-more' must not match
    out.write('p-and-more\n');
    err.write('run| starting agent| up\n'); // the marker inside a longer line
    out.write('agent'); // the start of a line on stdout ...
    err.write('| up\n'); // ... and the rest on stderr are not one line
    expect(fired).toBe(0);
    err.write('agent| ');
    err.write('up\nagent| up\n');
    expect(fired).toBe(1);
    out.write('\nagent| up\n');
    expect(fired).toBe(1);
  });
});
