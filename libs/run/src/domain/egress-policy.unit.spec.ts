/** The egress allowlist: host normalisation, authority parsing and CONNECT decisions (pure). */
import {
  allows,
  decideConnect,
  egressPolicy,
  formatIpv6,
  isPublicAddress,
  normaliseHost,
  parseAuthority,
  parseIpv4,
  parseIpv6,
  showUntrusted,
} from './egress-policy';

const openai = egressPolicy(['api.openai.com'], [443]);
const decide = (line: string, policy = openai) => decideConnect(policy, line);
const connect = (target: string, policy = openai) => decide(`CONNECT ${target} HTTP/1.1`, policy);

describe('normaliseHost', () => {
  it.each([
    ['api.openai.com', 'api.openai.com'],
    ['API.OpenAI.COM', 'api.openai.com'],
    ['api.openai.com.', 'api.openai.com'],
    ['xn--bcher-kva.example', 'xn--bcher-kva.example'],
    ['a-b.c_d.example', 'a-b.c_d.example'],
    ['localhost', 'localhost'],
  ])('%s is the name %s', (raw, name) => {
    expect(normaliseHost(raw)).toEqual({ kind: 'name', host: name });
  });

  it.each([
    '',
    '.',
    'api.openai.com..',
    '.api.openai.com',
    'api..openai.com',
    '-api.openai.com',
    'api-.openai.com',
    'bücher.example', // IDN must come as its A-label
    'аpi.openai.com', // Cyrillic a
    'api openai.com',
    'api.openai.com\0',
    'api.openai.com\r\n',
    'a'.repeat(64) + '.com',
    `${'a.'.repeat(127)}com`, // over 253
    '127.1', // IPv4 shorthand
    '2130706433', // IPv4 as one number
    '0x7f.0.0.1',
    'example.0x7f',
    '1.2.3.04', // leading zero: octal in some parsers
    '256.1.1.1',
    'example.123',
    '[::1', // unclosed
    '[fe80::1%eth0]', // zone
    '[1:2:3:4:5:6:7:8:9]',
    '[::1::2]',
    '[12345::]',
  ])('%j is refused', (raw) => {
    expect(normaliseHost(raw)).toBeNull();
  });

  it('IPv4 and IPv6 literals are canonical', () => {
    expect(normaliseHost('127.0.0.1')).toEqual({ kind: 'ipv4', host: '127.0.0.1' });
    expect(normaliseHost('[::1]')).toEqual({ kind: 'ipv6', host: '::1' });
    expect(normaliseHost('0:0:0:0:0:0:0:1')).toEqual({ kind: 'ipv6', host: '::1' });
    expect(normaliseHost('[2001:DB8:0:0:1:0:0:1]')).toEqual({ kind: 'ipv6', host: '2001:db8::1:0:0:1' });
    expect(normaliseHost('[::ffff:127.0.0.1]')).toEqual({ kind: 'ipv6', host: '::ffff:7f00:1' });
    expect(normaliseHost('[::]')).toEqual({ kind: 'ipv6', host: '::' });
  });
});

describe('IP parsing', () => {
  it('parseIpv4 is strict', () => {
    expect(parseIpv4('0.0.0.0')).toEqual([0, 0, 0, 0]);
    expect(parseIpv4('255.255.255.255')).toEqual([255, 255, 255, 255]);
    for (const bad of ['1.2.3', '1.2.3.4.5', '01.2.3.4', '1.2.3.256', '1.2.3.-1', '1.2.3.4 ', '1.2.3.0x1', '']) expect(parseIpv4(bad)).toBeNull();
  });

  it('parseIpv6 and formatIpv6 round-trip (RFC 5952)', () => {
    expect(formatIpv6(parseIpv6('2001:0db8:0000:0000:0000:ff00:0042:8329')!)).toBe('2001:db8::ff00:42:8329');
    expect(formatIpv6(parseIpv6('1:0:0:2:0:0:0:3')!)).toBe('1:0:0:2::3'); // the longest run
    expect(formatIpv6(parseIpv6('1:0:2:3:4:5:6:7')!)).toBe('1:0:2:3:4:5:6:7'); // a single 0 is not ::
    expect(formatIpv6(parseIpv6('1::')!)).toBe('1::');
    expect(parseIpv6('::1.2.3.4')).toEqual([0, 0, 0, 0, 0, 0, 0x0102, 0x0304]);
    expect(parseIpv6('1:2:3:4:5:6:1.2.3.4')).toEqual([1, 2, 3, 4, 5, 6, 0x0102, 0x0304]);
    for (const bad of ['1:2:3:4:5:6:7', '1:2:3:4:5:6:7:8::', '1:2:3:4:5:6::1.2.3.4', ':::', '1:::2', 'g::1', '::1.2.3', '1:2:3:4:5:6:7:8:1.2.3.4'])
      expect(parseIpv6(bad)).toBeNull();
  });
});

describe('parseAuthority', () => {
  it('host:port in canonical form', () => {
    expect(parseAuthority('API.openai.com.:443')).toMatchObject({ host: { kind: 'name', host: 'api.openai.com' }, port: 443, key: 'api.openai.com:443' });
    expect(parseAuthority('[::1]:8443')).toMatchObject({ host: { kind: 'ipv6', host: '::1' }, port: 8443, key: '[::1]:8443' });
    expect(parseAuthority('127.0.0.1:1')?.key).toBe('127.0.0.1:1');
    expect(parseAuthority('h:65535')?.port).toBe(65535);
  });

  it.each([
    'api.openai.com', // no port
    'api.openai.com:',
    'api.openai.com:0',
    'api.openai.com:65536',
    'api.openai.com:0443', // leading zero
    'api.openai.com:+443',
    'api.openai.com:443 ',
    'api.openai.com:443:443',
    'user@api.openai.com:443',
    'api.openai.com:443@evil.test:443',
    'evil.test:443#@api.openai.com:443',
    'api.openai.com:443/path',
    'api.openai.com:443?q',
    'api.openai.com\\@evil:443',
    '::1:443', // unbracketed IPv6
    '[::1]443',
    '[::1]',
    'http://api.openai.com:443',
    '%61pi.openai.com:443',
  ])('%j is malformed', (t) => {
    expect(parseAuthority(t)).toBeNull();
  });
});

describe('egressPolicy', () => {
  it('normalises and deduplicates entries', () => {
    expect(egressPolicy(['API.OpenAI.com.', 'api.openai.com', '[::1]', '127.0.0.1'], [443, 443, 8443])).toEqual({
      hosts: ['api.openai.com', '::1', '127.0.0.1'],
      ports: [443, 8443],
    });
  });
  it('refuses bad entries (operator input) with the entry named', () => {
    expect(() => egressPolicy(['*.openai.com'], [443])).toThrow(/"\*\.openai\.com" is not a host name/);
    expect(() => egressPolicy(['api.openai.com'], [0])).toThrow(/port 0/);
    expect(() => egressPolicy(['api.openai.com'], [443.5])).toThrow(/port/);
    expect(() => egressPolicy([], [443])).toThrow(/at least one host/);
    expect(() => egressPolicy(['a.com'], [])).toThrow(/at least one host/);
  });
});

describe('decideConnect', () => {
  it('allows exactly the listed host on a listed port, whatever the case or trailing dot', () => {
    for (const t of ['api.openai.com:443', 'API.OPENAI.COM:443', 'api.openai.com.:443']) {
      const d = connect(t);
      expect(d).toEqual({ allow: true, target: { host: { kind: 'name', host: 'api.openai.com' }, port: 443, key: 'api.openai.com:443' } });
    }
    expect(decide('CONNECT api.openai.com:443 HTTP/1.0').allow).toBe(true);
  });

  it.each([
    ['api.openai.com:80', 403],
    ['api.openai.com:8443', 403],
    ['x.api.openai.com:443', 403],
    ['api.openai.com.evil.test:443', 403],
    ['openai.com:443', 403],
    ['api-openai.com:443', 403],
    ['api.anthropic.com:443', 403],
    ['162.159.140.245:443', 403], // an IP literal matches only a listed literal
    ['[2606:4700::1]:443', 403],
    ['api.openai.com:443@evil.test', 400],
    ['evil.test:443@api.openai.com', 400],
    ['user:pass@api.openai.com:443', 400],
    ['api.openai.com', 400],
    ['0x7f.1:443', 400],
  ])('CONNECT %s is refused with %i', (t, status) => {
    const d = connect(t);
    expect(d.allow).toBe(false);
    if (!d.allow) expect(d.status).toBe(status);
  });

  it('IP literals are allowed when listed, compared canonically', () => {
    const p = egressPolicy(['127.0.0.1', '::1'], [8080]);
    expect(connect('127.0.0.1:8080', p).allow).toBe(true);
    expect(connect('[0:0:0:0:0:0:0:1]:8080', p).allow).toBe(true);
    expect(connect('[::ffff:127.0.0.1]:8080', p).allow).toBe(false); // a different literal
    expect(connect('localhost:8080', p).allow).toBe(false); // names are not resolved to match
    expect(connect('127.0.0.2:8080', p).allow).toBe(false);
  });

  it('only CONNECT in authority form: absolute-form and origin-form requests are 405', () => {
    for (const line of [
      'GET http://api.openai.com/v1/models HTTP/1.1',
      'GET / HTTP/1.1',
      'POST https://api.openai.com:443/ HTTP/1.1',
      'connect api.openai.com:443 HTTP/1.1',
    ]) {
      const d = decide(line);
      expect(d).toMatchObject({ allow: false, status: 405 });
    }
  });

  it.each([
    '',
    'CONNECT',
    'CONNECT api.openai.com:443',
    'CONNECT  api.openai.com:443 HTTP/1.1',
    'CONNECT api.openai.com:443 HTTP/1.1 ',
    'CONNECT api.openai.com:443 HTTP/2.0',
    'CONNECT api.openai.com:443 http/1.1',
    'CONNECT\tapi.openai.com:443 HTTP/1.1',
    'CONNECT api.openai.com:443\0 HTTP/1.1',
    'CONNECT api.openäi.com:443 HTTP/1.1',
  ])('malformed request line %j is 400', (line) => {
    expect(decide(line)).toMatchObject({ allow: false, status: 400 });
  });

  it('what is shown of a refused request is printable and bounded', () => {
    const d = decide(`CONNECT ${'a'.repeat(500)}\x1b[31m:443 HTTP/1.1`);
    expect(d.allow).toBe(false);
    if (!d.allow) {
      expect(d.shown.length).toBeLessThanOrEqual(120);
      expect(d.shown).toMatch(/^[\x21-\x7e]*$/);
    }
    expect(showUntrusted('a b\nc')).toBe('a?b?c');
  });

  it('allows() needs both host and port', () => {
    const t = parseAuthority('api.openai.com:443')!;
    expect(allows(openai, t)).toBe(true);
    expect(allows(egressPolicy(['api.openai.com'], [80]), t)).toBe(false);
    expect(allows(egressPolicy(['api.anthropic.com'], [443]), t)).toBe(false);
  });
});

describe('isPublicAddress', () => {
  it.each([
    '0.0.0.0',
    '10.1.2.3',
    '100.64.0.1',
    '127.0.0.1',
    '127.255.255.254',
    '169.254.169.254',
    '172.16.0.1',
    '172.31.255.255',
    '192.168.1.1',
    '192.0.0.8',
    '198.18.0.1',
    '224.0.0.1',
    '255.255.255.255',
    '::',
    '::1',
    'fc00::1',
    'fd12::1',
    'fe80::1',
    'ff02::1',
    '::ffff:127.0.0.1',
    '::ffff:10.0.0.1',
    '64:ff9b::a00:1',
    '2001:db8::1',
    'not-an-ip',
  ])('%s is not public', (a) => {
    expect(isPublicAddress(a)).toBe(false);
  });
  it.each(['1.1.1.1', '162.159.140.245', '172.32.0.1', '100.128.0.1', '2606:4700::6810:1', '::ffff:8.8.8.8', '64:ff9b::808:808'])('%s is public', (a) => {
    expect(isPublicAddress(a)).toBe(true);
  });
});
