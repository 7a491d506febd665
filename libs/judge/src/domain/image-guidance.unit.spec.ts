import { imageHint, requiredImages } from './image-guidance';

describe('the images a task needs, and how to provide a missing one', () => {
  it('docker_image is the one image; otherwise the Dockerfile bases, stages and scratch excluded', () => {
    expect(requiredImages({ kind: 'image', ref: 'ghcr.io/x/y:1' }, null)).toEqual({ images: [{ ref: 'ghcr.io/x/y:1', why: 'docker_image' }], problems: [] });
    const df = 'FROM assay/base:bookworm AS build\nRUN true\nFROM python:3.12-slim\nCOPY --from=build /a /a\nFROM scratch\n';
    expect(requiredImages({ kind: 'dockerfile' }, df).images).toEqual([
      { ref: 'assay/base:bookworm', why: 'FROM' },
      { ref: 'python:3.12-slim', why: 'FROM' },
    ]);
    expect(requiredImages({ kind: 'dockerfile' }, 'ARG V\nFROM python:$V\n').problems[0]).toMatch(/build argument/);
    expect(requiredImages({ kind: 'dockerfile' }, null)).toEqual({ images: [], problems: [] });
  });

  it('says how: the local base is built here; anything else is loaded, mirrored or built, never pulled by Assay', () => {
    expect(imageHint('assay/base:bookworm')).toBe('build it here: `assay images base`');
    const h = imageHint('ghcr.io/laude-institute/t-bench/fasttext:2.1');
    expect(h).toContain('Assay never pulls');
    expect(h).toContain('docker save ghcr.io/laude-institute/t-bench/fasttext:2.1 -o image.tar');
    expect(h).toContain('docker load -i image.tar');
    expect(h).toContain('registry-mirrors');
  });
});
