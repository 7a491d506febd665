import { Option, type Command } from 'commander';
import { AssayError, makeDirectories } from '@assay/core';
import type { Role } from '@assay/ledger';
import type { CliContext } from '../cli-context';
import { libs } from '../libs';
import { withBuses } from '../nest-context';

/** The roles a key can hold, as help text names them (a test keeps this equal to the ledger's ROLES). */
export const ROLE_HELP = 'controller, runtime, judge, auditor or publisher';

function roleOf(value: string): Role {
  const { ROLES, isRole } = libs.ledger();
  if (!isRole(value)) throw new AssayError('CLI_USAGE', 'invalid_input', `--role must be one of ${ROLES.join(', ')}, got "${value}"`);
  return value;
}

export function register(program: Command, ctx: CliContext): void {
  const keys = program.command('keys').description('Ed25519 signing keys and their roles');

  keys
    .command('generate')
    .description('write a new key pair: <name>.key (private, 0600) and <name>.pub (C2SP verifier key)')
    .requiredOption('--role <role>', `one of ${ROLE_HELP}`)
    .option('-o, --output <dir>', 'directory to write into (created 0700 if missing)')
    .addOption(new Option('--out <dir>', 'the same as --output (older spelling)').hideHelp())
    .option('--name <name>', 'key name (default assay-<role>-<8 hex>)')
    .option('--json', 'print JSON')
    .action((o: { role: string; output?: string; out?: string; name?: string; json?: boolean }) => {
      const role = roleOf(o.role);
      const dir = o.output ?? o.out;
      if (dir === undefined)
        throw new AssayError('CLI_USAGE', 'invalid_input', 'keys generate needs -o/--output DIR, the directory to write the key pair into');
      makeDirectories(dir, 0o700);
      const { generateKeyPair, writeKeyPair } = libs.ledger();
      const pair = generateKeyPair(role, o.name);
      const paths = writeKeyPair(dir, pair);
      if (o.json) return ctx.out(JSON.stringify({ role, signer: pair.signer, publicKey: pair.publicKeyText, ...paths }));
      ctx.out(
        `${role} key ${pair.signer}\n  private: ${paths.privateKeyPath} (keep it secret; readable by you only)\n  public:  ${paths.publicKeyPath}\n  ${pair.publicKeyText}`,
      );
    });

  keys
    .command('register')
    .description('record a public key and its role in the ledger (signed by the controller key)')
    .requiredOption('--public-key <file>', 'a <name>.pub verifier key file')
    .requiredOption('--role <role>', `one of ${ROLE_HELP}`)
    .option('--json', 'print JSON')
    .action(async (o: { publicKey: string; role: string; json?: boolean }) => {
      const role = roleOf(o.role);
      const { readPublicKey, RegisterKeyCommand } = libs.ledger();
      const key = readPublicKey(o.publicKey);
      const r = await withBuses(ctx, (b) => b.commands.execute(new RegisterKeyCommand({ name: key.name, signer: key.signer, publicKeyText: key.text }, role)));
      if (o.json) return ctx.out(JSON.stringify({ signer: key.signer, role, position: r.lastPosition, idempotent: r.idempotent }));
      ctx.out(`registered ${role} key ${key.signer} at position ${r.lastPosition}`);
    });

  keys
    .command('revoke')
    .description('record that a key may sign nothing from now on')
    .argument('<signer>', 'the key, as <name>+<8 hex key id>')
    .requiredOption('--reason <text>', 'why')
    .option('--json', 'print JSON')
    .action(async (signer: string, o: { reason: string; json?: boolean }) => {
      if (!/^[^\s+]{1,128}\+[0-9a-f]{8}$/.test(signer))
        throw new AssayError('CLI_USAGE', 'invalid_input', `the key must be given as <name>+<8 hex key id>, got "${signer}"`);
      const { RevokeKeyCommand } = libs.ledger();
      const r = await withBuses(ctx, (b) => b.commands.execute(new RevokeKeyCommand(signer, o.reason)));
      if (o.json) return ctx.out(JSON.stringify({ signer, revoked: true, position: r.lastPosition }));
      ctx.out(`revoked ${signer} at position ${r.lastPosition}`);
    });

  keys
    .command('list')
    .description('the keys registered in the ledger, with their roles and revocations')
    .option('--json', 'print JSON')
    .action(async (o: { json?: boolean }) => {
      const { ListKeysQuery } = libs.ledger();
      const list = await withBuses(ctx, (b) => b.queries.execute(new ListKeysQuery()));
      if (o.json) return ctx.out(JSON.stringify(list, null, 2));
      for (const k of list)
        ctx.out(`${k.role.padEnd(10)} ${k.keyId}  registered at ${k.registeredAt}${k.revokedAt !== null ? `, revoked at ${k.revokedAt}` : ''}`);
    });
}
