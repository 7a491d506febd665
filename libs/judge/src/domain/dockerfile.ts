/**
 * What a task's Dockerfile needs from outside its build context, read before any build so that nothing is ever
 * fetched: the images named by `FROM` and `COPY --from` (each must already exist in the local daemon, since no
 * registry is reachable and a missing one would make the daemon try to pull it), and instructions that would reach
 * the network on their own (`ADD <url>`, `ADD <git repo>`), which are refused. Build arguments in image names are
 * refused too: Assay passes none, so every base image must be named literally.
 */
export interface DockerfileRefs {
  /** Images the build needs, in order of first use, without stage names or `scratch`. */
  readonly images: readonly string[];
  readonly problems: readonly string[];
}

/** Joins continuation lines, drops comments and blank lines; returns [line number, text] per instruction. */
function instructions(text: string): Array<[number, string]> {
  const lines = text.replace(/^\uFEFF/, '').split(/\r?\n/);
  let escape = '\\';
  // Parser directives: only at the very top, `# directive=value`.
  for (const l of lines) {
    const m = /^#\s*([a-zA-Z]+)\s*=\s*(\S+)\s*$/.exec(l);
    if (!m) break;
    if ((m[1] as string).toLowerCase() === 'escape' && (m[2] === '`' || m[2] === '\\')) escape = m[2];
  }
  const out: Array<[number, string]> = [];
  let cur = '';
  let start = 0;
  lines.forEach((raw, i) => {
    const t = raw.trim();
    if (cur === '' && (t === '' || t.startsWith('#'))) return;
    if (cur !== '' && t.startsWith('#')) return; // comments inside continuations are dropped
    if (cur === '') start = i + 1;
    if (t.endsWith(escape)) {
      cur += `${t.slice(0, -1)} `;
      return;
    }
    cur += t;
    out.push([start, cur]);
    cur = '';
  });
  if (cur !== '') out.push([start, cur]);
  return out;
}

const words = (s: string): string[] => s.split(/\s+/).filter((w) => w !== '');

export function dockerfileRefs(text: string): DockerfileRefs {
  const images: string[] = [];
  const problems: string[] = [];
  const stages: string[] = [];
  const need = (ref: string, line: number, what: string) => {
    if (ref.includes('$')) {
      problems.push(
        `Dockerfile line ${line}: ${what} ${JSON.stringify(ref)} uses a build argument; name the image literally (Assay passes no build arguments and never pulls)`,
      );
      return;
    }
    if (ref.toLowerCase() === 'scratch' || stages.includes(ref.toLowerCase()) || /^\d+$/.test(ref)) return;
    if (!images.includes(ref)) images.push(ref);
  };
  for (const [line, instr0] of instructions(text)) {
    const [instr = '', ...rest] = words(instr0);
    const op = instr.toUpperCase();
    if (op === 'FROM') {
      const args = rest.filter((w) => !w.startsWith('--'));
      const ref = args[0];
      if (ref === undefined) {
        problems.push(`Dockerfile line ${line}: FROM without an image`);
        continue;
      }
      need(ref, line, 'FROM');
      if ((args[1] ?? '').toUpperCase() === 'AS' && args[2]) stages.push(args[2].toLowerCase());
      else stages.push(String(stages.length));
    } else if (op === 'COPY' || op === 'ADD') {
      for (const w of rest) {
        const m = /^--from=(.+)$/i.exec(w);
        if (m) need(m[1] as string, line, `${op} --from`);
      }
      if (op === 'ADD') {
        for (const w of rest.filter((x) => !x.startsWith('--'))) {
          if (/^(https?|ftp|git|ssh):\/\//i.test(w) || /^git@/i.test(w) || /\.git(#.*)?$/i.test(w)) {
            problems.push(`Dockerfile line ${line}: ADD ${w} would fetch from the network while building; put the file in environment/ instead`);
          }
        }
      }
    }
  }
  if (stages.length === 0) problems.push('Dockerfile: no FROM instruction');
  return { images, problems };
}
