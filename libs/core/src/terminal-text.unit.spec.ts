import { AGENT_LINE_PREFIX, escapeTerminalText, MarkedLineStream } from './terminal-text';

// Anything a terminal acts on rather than prints: C0 but tab and newline, DEL, C1, bidi/zero-width/separators.
const ACTIVE = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u2064\u2066-\u2069\ufeff]/;

describe('escapeTerminalText', () => {
  it('keeps ordinary text, tabs, newlines, any script and emoji as they are', () => {
    const t = 'step 3: loss=0.25\tok\nnaïve 日本語 ✓ 🚀 \\x1b literal';
    expect(escapeTerminalText(t)).toBe(t);
  });

  it('shows escape sequences instead of running them: titles, hidden text, cursor moves, colours, erase', () => {
    expect(escapeTerminalText('\x1b]0;pwned\x07')).toBe('\\x1b]0;pwned\\x07'); // window title (OSC ... BEL)
    expect(escapeTerminalText('\x1b]2;t\x1b\\')).toBe('\\x1b]2;t\\x1b\\');
    expect(escapeTerminalText('\x1b[8mhidden\x1b[0m')).toBe('\\x1b[8mhidden\\x1b[0m'); // concealed text
    expect(escapeTerminalText('\x1b[2A\x1b[2K\x1b[1;1H')).toBe('\\x1b[2A\\x1b[2K\\x1b[1;1H'); // cursor up, erase, home
    expect(escapeTerminalText('\u009b31m')).toBe('\\u{9b}31m'); // 8-bit CSI
    expect(escapeTerminalText('\u009d0;x\u009c')).toBe('\\u{9d}0;x\\u{9c}'); // 8-bit OSC / ST
  });

  it('a carriage return or backspace cannot overwrite what is already on the line', () => {
    expect(escapeTerminalText('progress\rbest: round 9')).toBe('progress\\rbest: round 9');
    expect(escapeTerminalText('abc\b\b\bxyz')).toBe('abc\\x08\\x08\\x08xyz');
    expect(escapeTerminalText('\x00\x7f\x0b\x0c')).toBe('\\x00\\x7f\\x0b\\x0c');
  });

  it('shows bidi overrides, zero-width characters, separators and lone surrogates', () => {
    expect(escapeTerminalText('a\u202eb\u2066c\u200bd\u2028e\ufeff')).toBe('a\\u{202e}b\\u{2066}c\\u{200b}d\\u{2028}e\\u{feff}');
    expect(escapeTerminalText('x\ud800y\udc00')).toBe('x\\u{d800}y\\u{dc00}');
  });

  it('newlines: true makes a one-line field', () => {
    expect(escapeTerminalText('a\nb\tc\r', { newlines: true })).toBe('a\\nb\\tc\\r');
  });

  it('never leaves an active character, whatever the input (all code units)', () => {
    let all = '';
    for (let c = 0; c < 0x10000; c++) all += String.fromCharCode(c);
    const out = escapeTerminalText(all);
    expect(ACTIVE.test(out)).toBe(false);
    expect(/[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/.test(out)).toBe(false);
  });
});

describe('MarkedLineStream', () => {
  const feed = (chunks: Array<string | Buffer>, max?: number) => {
    const s = new MarkedLineStream(AGENT_LINE_PREFIX, max);
    return chunks.map((c) => s.push(c)).join('') + s.end();
  };

  it("marks every line as the agent's, so no line can pass for one of Assay's", () => {
    const out = feed(['hello\nbest      round 9, score 1e9\n', 'run       r (t) completed\nno newline']);
    expect(out).toBe('agent| hello\nagent| best      round 9, score 1e9\nagent| run       r (t) completed\nagent| no newline\n');
    for (const l of out.split('\n').filter(Boolean)) expect(l.startsWith(AGENT_LINE_PREFIX)).toBe(true);
  });

  it('holds lines and characters split across chunks (bytes cut in the middle of a character)', () => {
    const bytes = Buffer.from('héllo wörld\n\x1b[2Jgone\n');
    const chunks = [...bytes].map((b) => Buffer.from([b]));
    expect(feed(chunks)).toBe('agent| héllo wörld\nagent| \\x1b[2Jgone\n');
  });

  it('a CR inside a line cannot rewrite the line start, and invalid UTF-8 becomes U+FFFD', () => {
    expect(feed([Buffer.from([0x66, 0x0d, 0x62, 0xff, 0x0a])])).toBe('agent| f\\rb\ufffd\n');
  });

  it('cuts a line longer than the limit into marked pieces', () => {
    expect(feed(['abcdefghij\n'], 4)).toBe('agent| abcd\nagent|+ efgh\nagent|+ ij\n');
  });
});
