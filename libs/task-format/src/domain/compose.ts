/**
 * The narrow Compose subset the RSI Harness accepts in environment/docker-compose.yaml, read the same way: one
 * service named `main` with `build` (the environment/ directory itself), `image`, `working_dir`, `user`,
 * `environment`, `shm_size` and an exact NVIDIA GPU reservation. Anything else is refused: Assay owns networks,
 * mounts, devices and privileges, and silently ignoring such settings would change what the task means.
 */
import { TASK_ERROR_CODES as C } from '../task-format.errors';
import { ENV_NAME } from './env-template';
import { checkString, describe, keyPath, Problems, type Table } from './values';

export const COMPOSE_FILE = 'environment/docker-compose.yaml';

export interface ComposeMain {
  /** `build` names environment/ itself: build environment/Dockerfile. */
  readonly build: boolean;
  readonly image: string | null;
  readonly workingDir: string | null;
  readonly user: string | null;
  /** Values as template strings: a variable listed without a value becomes `${NAME}`. */
  readonly env: Readonly<Record<string, string>>;
  readonly shmSizeBytes: number | null;
  /** Count of the NVIDIA device reservation, or null when there is none. */
  readonly gpus: number | null;
}

const MAIN_KEYS = ['build', 'image', 'working_dir', 'user', 'environment', 'shm_size', 'deploy'];
const MAIN_KEY_REASON =
  'only build, image, working_dir, user, environment, shm_size and the NVIDIA GPU reservation under deploy are read ' +
  'from Compose; Assay owns networks, mounts, devices, privileges and processes';

function isMap(v: unknown): v is Table {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function yamlDescribe(v: unknown): string {
  if (typeof v === 'number') return `the number ${v}`;
  return describe(v);
}

const SIZE = /^([1-9][0-9]*)(b|k|kb|m|mb|g|gb)?$/;
const UNIT: Readonly<Record<string, number>> = { '': 1, b: 1, k: 1024, kb: 1024, m: 1024 ** 2, mb: 1024 ** 2, g: 1024 ** 3, gb: 1024 ** 3 };

/** `8g` -> 8589934592; plain integers are bytes. */
export function parseShmSize(raw: string | number): number | undefined {
  const s = String(raw).trim().toLowerCase();
  const m = SIZE.exec(s);
  if (!m) return undefined;
  const n = Number(m[1]) * (UNIT[m[2] ?? ''] ?? NaN);
  return Number.isSafeInteger(n) && n > 0 ? n : undefined;
}

function readGpuReservation(p: Problems, deploy: unknown, at: string): number | null | undefined {
  const fail = (where: string, msg: string) => {
    p.add(
      C.UNSUPPORTED,
      where,
      `not supported by Assay: ${msg}; the only accepted deploy block is ` +
        'resources.reservations.devices: [{driver: nvidia, count: N, capabilities: [gpu]}]',
    );
    return undefined;
  };
  if (!isMap(deploy)) return fail(at, `expected a mapping, got ${yamlDescribe(deploy)}`);
  const keys = Object.keys(deploy);
  if (keys.length !== 1 || keys[0] !== 'resources') return fail(at, `unexpected keys ${keys.join(', ')}`);
  const resources = deploy.resources;
  const rAt = `${at}.resources`;
  if (!isMap(resources) || Object.keys(resources).join() !== 'reservations') return fail(rAt, 'only reservations may appear');
  const reservations = resources.reservations;
  const vAt = `${rAt}.reservations`;
  if (!isMap(reservations) || Object.keys(reservations).join() !== 'devices') return fail(vAt, 'only devices may appear');
  const devices = reservations.devices;
  const dAt = `${vAt}.devices`;
  if (!Array.isArray(devices) || devices.length !== 1) return fail(dAt, 'exactly one device entry is accepted');
  const dev: unknown = devices[0];
  const eAt = `${dAt}[0]`;
  if (!isMap(dev)) return fail(eAt, 'expected a mapping');
  for (const k of Object.keys(dev)) {
    if (!['driver', 'count', 'capabilities'].includes(k)) {
      return fail(`${eAt}.${k}`, k === 'device_ids' ? 'device_ids (physical GPUs are chosen by the runtime)' : `the key ${k}`);
    }
  }
  if (dev.driver !== 'nvidia') return fail(`${eAt}.driver`, `driver ${yamlDescribe(dev.driver)} (only nvidia)`);
  const caps = dev.capabilities;
  if (!Array.isArray(caps) || caps.length !== 1 || caps[0] !== 'gpu') return fail(`${eAt}.capabilities`, 'capabilities other than exactly [gpu]');
  if (dev.count === 'all') {
    return fail(`${eAt}.count`, 'count: all (Assay needs a fixed GPU count to plan, budget and fingerprint a run)');
  }
  if (typeof dev.count !== 'number' || !Number.isSafeInteger(dev.count) || dev.count < 1 || dev.count > 4096) {
    p.add(C.INVALID_VALUE, `${eAt}.count`, `expected an integer from 1 to 4096, got ${yamlDescribe(dev.count)}`);
    return undefined;
  }
  return dev.count;
}

function readEnvironment(p: Problems, v: unknown, at: string): Record<string, string> {
  const out: Record<string, string> = {};
  const put = (name: string, value: string, where: string) => {
    if (!ENV_NAME.test(name)) {
      p.add(C.INVALID_VALUE, where, `expected an environment variable name ([A-Za-z_][A-Za-z0-9_]*), got ${JSON.stringify(name)}`);
      return;
    }
    if (Object.prototype.hasOwnProperty.call(out, name)) {
      p.add(C.CONFLICT, where, `${name} is set twice`);
      return;
    }
    out[name] = value;
  };
  if (Array.isArray(v)) {
    v.forEach((item: unknown, i) => {
      const where = `${at}[${i}]`;
      if (typeof item !== 'string') {
        p.add(C.INVALID_TYPE, where, `expected "NAME=value" or "NAME", got ${yamlDescribe(item)}`);
        return;
      }
      const eq = item.indexOf('=');
      if (eq < 0) put(item, `\${${item}}`, where);
      else put(item.slice(0, eq), item.slice(eq + 1), where);
    });
    return out;
  }
  if (isMap(v)) {
    for (const [name, value] of Object.entries(v)) {
      const where = keyPath(at, name);
      if (value === null || value === undefined) put(name, `\${${name}}`, where);
      else if (typeof value === 'string') put(name, value, where);
      else if (typeof value === 'number' && Number.isFinite(value)) put(name, String(value), where);
      else if (typeof value === 'boolean') put(name, String(value), where);
      else p.add(C.INVALID_TYPE, where, `expected a string, number or boolean, got ${yamlDescribe(value)}`);
    }
    return out;
  }
  p.add(C.INVALID_TYPE, at, `expected a mapping or a list of "NAME=value", got ${yamlDescribe(v)}`);
  return out;
}

/** Reads the parsed Compose document; returns undefined when it cannot be used (problems say why). */
export function readCompose(p: Problems, doc: unknown): ComposeMain | undefined {
  if (!isMap(doc)) {
    p.add(C.INVALID_TYPE, null, `expected a mapping with a services key, got ${yamlDescribe(doc)}`);
    return undefined;
  }
  let ok = true;
  for (const k of Object.keys(doc)) {
    if (k !== 'services') {
      p.add(C.UNSUPPORTED, k, 'not supported by Assay: a task Compose file may only contain services (one service, main)');
      ok = false;
    }
  }
  const services = doc.services;
  if (!isMap(services)) {
    p.add(services === undefined ? C.MISSING_KEY : C.INVALID_TYPE, 'services', 'expected a mapping with exactly one service, main');
    return undefined;
  }
  for (const k of Object.keys(services)) {
    if (k !== 'main') {
      p.add(C.UNSUPPORTED, keyPath('services', k), 'not supported by Assay: sidecar services (only the service main)');
      ok = false;
    }
  }
  const main = services.main;
  if (!isMap(main)) {
    p.add(main === undefined ? C.MISSING_KEY : C.INVALID_TYPE, 'services.main', 'expected the mapping of the service main');
    return undefined;
  }
  const at = 'services.main';
  for (const k of Object.keys(main)) {
    if (!MAIN_KEYS.includes(k)) {
      p.add(C.UNSUPPORTED, keyPath(at, k), `not supported by Assay: ${MAIN_KEY_REASON}`);
      ok = false;
    }
  }

  let build = false;
  if (main.build !== undefined) {
    const ctx = typeof main.build === 'string' ? main.build : isMap(main.build) ? main.build.context : undefined;
    const extra = isMap(main.build) ? Object.keys(main.build).filter((k) => k !== 'context') : [];
    if (extra.length > 0) {
      p.add(C.UNSUPPORTED, `${at}.build.${extra[0]}`, 'not supported by Assay: build options other than context');
      ok = false;
    } else if (typeof ctx !== 'string' || !['.', './'].includes(ctx.trim())) {
      p.add(C.UNSUPPORTED, `${at}.build`, `not supported by Assay: a build context other than environment/ itself ("."), got ${yamlDescribe(ctx)}`);
      ok = false;
    } else build = true;
  }

  let image: string | null = null;
  if (main.image !== undefined) {
    if (typeof main.image !== 'string') {
      p.add(C.INVALID_TYPE, `${at}.image`, `expected an image reference string, got ${yamlDescribe(main.image)}`);
      ok = false;
    } else
      image =
        checkString(p, `${at}.image`, main.image, { nonEmpty: true, maxLength: 512, pattern: /^\S+$/, patternHint: 'an image reference without spaces' }) ??
        null;
  }
  if (build && image !== null) {
    p.add(C.CONFLICT, `${at}.image`, 'build and image cannot both be declared');
    ok = false;
  }

  let workingDir: string | null = null;
  if (main.working_dir !== undefined) {
    if (typeof main.working_dir !== 'string') {
      p.add(C.INVALID_TYPE, `${at}.working_dir`, `expected an absolute path, got ${yamlDescribe(main.working_dir)}`);
      ok = false;
    } else workingDir = main.working_dir;
  }

  let user: string | null = null;
  if (main.user !== undefined) {
    if (typeof main.user === 'number') {
      if (Number.isSafeInteger(main.user) && main.user >= 0 && main.user <= 2 ** 31 - 1) user = String(main.user);
      else {
        p.add(C.INVALID_VALUE, `${at}.user`, `expected a uid from 0 to ${2 ** 31 - 1}, got ${yamlDescribe(main.user)}`);
        ok = false;
      }
    } else if (typeof main.user === 'string') {
      user =
        checkString(p, `${at}.user`, main.user, { nonEmpty: true, maxLength: 256, pattern: /^[A-Za-z0-9_.:-]+$/, patternHint: 'a user name or uid[:gid]' }) ??
        null;
    } else {
      p.add(C.INVALID_TYPE, `${at}.user`, `expected a user name or numeric uid, got ${yamlDescribe(main.user)}`);
      ok = false;
    }
  }

  const env = main.environment === undefined ? {} : readEnvironment(p, main.environment, `${at}.environment`);

  let shmSizeBytes: number | null = null;
  if (main.shm_size !== undefined) {
    const raw = main.shm_size;
    const n = typeof raw === 'string' || typeof raw === 'number' ? parseShmSize(raw) : undefined;
    if (n === undefined) {
      p.add(C.INVALID_VALUE, `${at}.shm_size`, `expected a positive size such as 1073741824, 512m or 8g, got ${yamlDescribe(raw)}`);
      ok = false;
    } else shmSizeBytes = n;
  }

  let gpus: number | null = null;
  if (main.deploy !== undefined) {
    const n = readGpuReservation(p, main.deploy, `${at}.deploy`);
    if (n === undefined) ok = false;
    else gpus = n;
  }

  if (!ok) return undefined;
  return Object.freeze({ build, image, workingDir, user, env: Object.freeze(env), shmSizeBytes, gpus });
}
