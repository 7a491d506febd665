/** Renders the event catalogue as Markdown (docs/events.md), so the reader's version cannot drift from the code. */
import { CATALOGUE } from './catalogue';
import type { FieldSpec } from './schema';

function typeOf(f: FieldSpec): string {
  const base = (() => {
    switch (f.kind) {
      case 'string':
        if (f.enum) return f.enum.map((e) => `\`${e}\``).join(' \\| ');
        return `string (${f.min ? `${f.min}-` : '≤ '}${f.max} chars${f.pattern ? `, \`${f.pattern.source.replace(/\|/g, '\\|')}\`` : ''})`;
      case 'integer':
        return `integer${f.min !== undefined ? ` ≥ ${f.min}` : ''}${f.max !== undefined ? ` ≤ ${f.max}` : ''}`;
      case 'number':
        return f.exactly !== undefined ? `number, always ${f.exactly}` : `finite number${f.min !== undefined ? ` ≥ ${f.min}` : ''}`;
      case 'boolean':
        return 'boolean';
      case 'object':
        return `object {${Object.keys(f.fields).join(', ')}}`;
      case 'map':
        return `object of ${typeOf(f.values)} (≤ ${f.maxKeys} keys${f.keyPattern ? `, names \`${f.keyPattern.source}\`` : ''})`;
      case 'array':
        return `array of ${typeOf(f.of)} (≤ ${f.max})`;
      case 'freeObject':
        return 'object (free-form)';
    }
  })();
  return `${base}${f.nullable ? ' or null' : ''}`;
}

export function renderCatalogueMarkdown(): string {
  const out: string[] = [
    '# Event catalogue',
    '',
    'Generated from `libs/ledger/src/domain/catalogue.ts` by `npm run docs:events`; a unit test fails when this page',
    'and the code disagree. Every event is an [envelope](formats.md#event-envelope) whose `data` follows the schema of',
    'its type: the fields below and no others. Types not listed here are refused on append and reported by verification.',
    '',
    '| type | signed by | what it records |',
    '|---|---|---|',
  ];
  for (const s of CATALOGUE.values()) out.push(`| [\`${s.type}\`](#${s.type.toLowerCase()}) | ${s.roles.join(', ')} | ${s.summary} |`);
  for (const s of CATALOGUE.values()) {
    out.push('', `## ${s.type}`, '', `${s.summary} Signed by: ${s.roles.join(' or ')}. Data at most ${s.maxDataBytes} bytes (canonical JSON).`, '');
    out.push('| field | type | required |', '|---|---|---|');
    for (const [name, f] of Object.entries(s.schema)) out.push(`| \`${name}\` | ${typeOf(f)} | ${f.optional ? 'no' : 'yes'} |`);
  }
  return `${out.join('\n')}\n`;
}
