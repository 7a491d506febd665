import { dockerfileRefs } from './dockerfile';

describe('dockerfileRefs', () => {
  it('lists the images a build needs, without stages or scratch', () => {
    const r = dockerfileRefs(
      [
        '# syntax comment',
        'FROM --platform=linux/amd64 assay/base:bookworm AS build',
        'RUN make \\',
        '  all',
        'FROM scratch',
        'COPY --from=build /out /out',
        'COPY --from=tools:1 /t /t',
        'FROM build',
      ].join('\n'),
    );
    expect(r).toEqual({ images: ['assay/base:bookworm', 'tools:1'], problems: [] });
  });
  it('refuses fetching from the network and build arguments in image names', () => {
    const r = dockerfileRefs(
      ['ARG BASE=assay/base:bookworm', 'FROM $BASE', 'ADD https://example.invalid/x.tgz /x', 'ADD git@example.invalid:a/b.git /src'].join('\n'),
    );
    expect(r.problems).toEqual([
      expect.stringContaining('line 2: FROM "$BASE" uses a build argument'),
      expect.stringContaining('line 3: ADD https://example.invalid/x.tgz would fetch from the network'),
      expect.stringContaining('line 4: ADD git@example.invalid:a/b.git would fetch'),
    ]);
  });
  it('needs a FROM, and honours the escape directive', () => {
    expect(dockerfileRefs('RUN true').problems).toEqual(['Dockerfile: no FROM instruction']);
    expect(dockerfileRefs('# escape=`\nFROM `\n  assay/base:bookworm').images).toEqual(['assay/base:bookworm']);
  });
});
