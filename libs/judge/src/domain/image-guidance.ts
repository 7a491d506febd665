/**
 * What a task needs from the local Docker daemon, and what to tell an operator whose machine lacks it. Assay never
 * pulls (Work and Judges run without a registry), so a published task whose environment names a registry image
 * (Terminal-Bench's `docker_image`, an OpenRSI Dockerfile `FROM ghcr.io/...`) runs only once that image has been
 * provided by hand. Pure: the caller inspects the daemon.
 */
import { dockerfileRefs } from './dockerfile';

export interface RequiredImage {
  readonly ref: string;
  /** `docker_image`: the image Work runs; `FROM`: a base the environment's Dockerfile builds on. */
  readonly why: 'docker_image' | 'FROM';
}

/** The images a task's environment needs locally: its docker_image, or its Dockerfile's bases (the local base included). */
export function requiredImages(
  image: { readonly kind: 'image'; readonly ref: string } | { readonly kind: string },
  dockerfile: string | null,
): { images: RequiredImage[]; problems: string[] } {
  if (image.kind === 'image') return { images: [{ ref: (image as { ref: string }).ref, why: 'docker_image' }], problems: [] };
  if (dockerfile === null) return { images: [], problems: [] };
  const refs = dockerfileRefs(dockerfile);
  return { images: refs.images.map((ref) => ({ ref, why: 'FROM' as const })), problems: [...refs.problems] };
}

/** One line: how to provide an image this machine lacks. */
export function imageHint(ref: string): string {
  if (ref.startsWith('assay/base')) return 'build it here: `assay images base`';
  return `Assay never pulls: load it (\`docker pull ${ref} && docker save ${ref} -o image.tar\` where the registry is reachable, then \`docker load -i image.tar\` here), pull it through a registry mirror this machine reaches ("registry-mirrors" in /etc/docker/daemon.json), or build it here and tag it ${ref}`;
}
